package bench

import (
	"errors"

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
	dirs, derr := lab.RemoveStaleStateDirs(stateDir, "bench")
	return append(removed, dirs...), errors.Join(err, derr)
}
