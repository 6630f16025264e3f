package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/plot"
	"github.com/wanlab/wanlab/analyzer/report"
)

// plotFlags are the analyze command's graph outputs.
func plotFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "plots", Usage: "write every graph of the selected connections to `DIR` as <conn>-<c2s|s2c>-<graph>.svg and .png"},
		&cli.StringFlag{Name: "report", Usage: "write a self-contained HTML report (summary, diagnosis, zoomable graphs) to `FILE.html`"},
	}
}

// applyPlotFlags writes the graphs and the report that --plots and
// --report ask for, naming each file written on the app's error writer so
// the chosen --format output stays clean on stdout.
func applyPlotFlags(cc *cli.Context, res *analyzer.Result, conns []*analyzer.Connection) error {
	if dir := cc.String("plots"); dir != "" {
		paths, err := plot.WriteDir(dir, conns)
		if err != nil {
			return fmt.Errorf("analyze: --plots %s: %w", dir, err)
		}
		fmt.Fprintf(cc.App.ErrWriter, "wrote %d graph files to %s\n", len(paths), dir)
	}
	if path := cc.String("report"); path != "" {
		if err := writeReport(path, res, conns); err != nil {
			return fmt.Errorf("analyze: --report %s: %w", path, err)
		}
		fmt.Fprintf(cc.App.ErrWriter, "wrote report %s\n", path)
	}
	return nil
}

func writeReport(path string, res *analyzer.Result, conns []*analyzer.Connection) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	page := report.Page{
		Title:    "wanlab analyze " + filepath.Base(res.File),
		Sections: []report.Section{{Title: res.File, Result: res, Connections: conns}},
	}
	err = report.Write(w, page)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
