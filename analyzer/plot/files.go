package plot

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wanlab/wanlab/analyzer"
)

// WriteDir writes every graph of every direction that carried data of the
// given connections to dir (created if missing) as
// <conn>-<dir>-<kind>.svg and .png, and returns the paths written.
func WriteDir(dir string, conns []*analyzer.Connection) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	return WriteGraphs(dir, conns, writeFile)
}

// WriteGraphs calls write with every graph of every direction of conns
// that carried data, in SVG and in PNG, and its path in dir
// (<conn>-<dir>-<kind>.svg and .png); it returns the paths written, up
// to the first error.
func WriteGraphs(dir string, conns []*analyzer.Connection, write func(path string, g *Graph, f Format) error) ([]string, error) {
	var paths []string
	for _, c := range conns {
		for i := range c.Directions {
			if !HasData(c, i) {
				continue
			}
			for _, g := range Graphs(c, i) {
				for _, f := range []Format{SVG, PNG} {
					p := filepath.Join(dir, g.Name()+"."+string(f))
					if err := write(p, g, f); err != nil {
						return paths, err
					}
					paths = append(paths, p)
				}
			}
		}
	}
	return paths, nil
}

func writeFile(path string, g *Graph, f Format) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	w := bufio.NewWriter(fh)
	err = Render(w, g, f)
	if err == nil {
		err = w.Flush()
	}
	if cerr := fh.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("plot: %w", cerr)
	}
	return err
}
