package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// RemoveStaleStateDirs removes the per-lab state directories under dir
// (dir/<lab id>/, as the proxy and kernel qdisc setups of an experiment or
// a bench keep them) whose lab no longer exists, and returns what it
// removed as "state <path>". A directory whose lab's router namespace is
// still there, a name that cannot be a lab ID, and plain files are left
// alone; a missing dir is not an error. what names the owner in errors
// ("experiment state: ...").
//
// Run it after Cleanup, which removes the namespaces of dead labs, so
// their state directories count as stale here.
func RemoveStaleStateDirs(dir, what string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s state: %w", what, err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !validID(id) || nsrun.Exists(nsName(id, RoleRouter)) {
			continue // a live lab's, or not ours
		}
		path := filepath.Join(dir, id)
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, fmt.Errorf("%s state: %w", what, err))
			continue
		}
		removed = append(removed, "state "+path)
	}
	return removed, errors.Join(errs...)
}
