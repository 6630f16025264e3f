package main

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/plot"
	"github.com/wanlab/wanlab/analyzer/report"
	"github.com/wanlab/wanlab/internal/hostfile"
)

// plotFlags are the analyze command's graph outputs.
func plotFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "plots", Usage: "write every graph of the selected connections to `DIR` as <conn>-<c2s|s2c>-<graph>.svg and .png"},
		&cli.StringFlag{Name: "report", Usage: "write a self-contained HTML report (summary, diagnosis, zoomable graphs) to `FILE.html`"},
		&cli.BoolFlag{Name: "force", Usage: "replace an existing --report FILE or write into an existing --plots DIR (replacing files by rename, never writing through them)"},
	}
}

// applyPlotFlags writes the graphs and the report that --plots and
// --report ask for, naming each file written on the app's error writer so
// the chosen --format output stays clean on stdout.
func applyPlotFlags(cc *cli.Context, res *analyzer.Result, conns []*analyzer.Connection) error {
	if dir := cc.String("plots"); dir != "" {
		paths, err := writePlots(dir, conns, cc.Bool("force"))
		if err != nil {
			return fmt.Errorf("analyze: --plots %s: %w", dir, err)
		}
		fmt.Fprintf(cc.App.ErrWriter, "wrote %d graph files to %s\n", len(paths), dir)
	}
	if path := cc.String("report"); path != "" {
		if err := writeReport(path, res, conns, cc.Bool("force")); err != nil {
			return fmt.Errorf("analyze: --report %s: %w", path, err)
		}
		fmt.Fprintf(cc.App.ErrWriter, "wrote report %s\n", path)
	}
	return nil
}

// writePlots writes every graph of every direction that carried data to
// dir, a new directory (or an existing one with force), as
// <conn>-<dir>-<kind>.svg and .png, and returns the paths written. Files
// are made by hostfile.CreateOutput: a name planted in dir is refused, or
// replaced with force, never written through.
func writePlots(dir string, conns []*analyzer.Connection, force bool) ([]string, error) {
	if err := hostfile.OutputDir(dir, force); err != nil {
		return nil, err
	}
	return plot.WriteGraphs(dir, conns, func(path string, g *plot.Graph, f plot.Format) error {
		return writeAnalyzeOutput(path, force, func(w io.Writer) error { return plot.Render(w, g, f) })
	})
}

// writeAnalyzeOutput creates path (hostfile.CreateOutput, mode 0644) and fills
// it through a buffer with write.
func writeAnalyzeOutput(path string, force bool, write func(io.Writer) error) error {
	f, err := hostfile.CreateOutput(path, 0o644, force)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeReport(path string, res *analyzer.Result, conns []*analyzer.Connection, force bool) error {
	page := report.Page{
		Title:    "wanlab analyze " + filepath.Base(res.File),
		Sections: []report.Section{{Title: res.File, Result: res, Connections: conns}},
	}
	return writeAnalyzeOutput(path, force, func(w io.Writer) error { return report.Write(w, page) })
}
