package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
)

// Cleanup removes what a killed bench left behind: the labs of dead
// processes (namespaces, and with them the veths, the proxy's TUNs, rules
// and qdiscs, which all live inside them), then the state directories
// under StateDir of labs that no longer exist.
func Cleanup() ([]string, error) {
	return cleanupIn(StateDir)
}

func cleanupIn(stateDir string) ([]string, error) {
	removed, err := lab.Cleanup()
	ents, rerr := os.ReadDir(stateDir)
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
		dir := filepath.Join(stateDir, id)
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("bench state: %w", rmErr))
			continue
		}
		removed = append(removed, "state "+dir)
	}
	return removed, err
}
