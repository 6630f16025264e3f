package experiment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
)

// Cleanup removes what crashed experiments left behind: the labs of dead
// processes (namespaces, and with them the veths, the proxy's TUNs, rules
// and routes and any qdiscs, which all live inside them), then the proxy
// and qdisc state directories of labs that no longer exist.
func Cleanup() ([]string, error) {
	removed, err := lab.Cleanup()
	ents, rerr := os.ReadDir(StateDir)
	if rerr != nil {
		if errors.Is(rerr, os.ErrNotExist) {
			return removed, err
		}
		return removed, errors.Join(err, rerr)
	}
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || nsrun.Exists(lab.NamePrefix+id+"-"+lab.RoleRouter) {
			continue // a live lab's, or not ours
		}
		dir := filepath.Join(StateDir, id)
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("experiment state: %w", rmErr))
			continue
		}
		removed = append(removed, "state "+dir)
	}
	return removed, err
}
