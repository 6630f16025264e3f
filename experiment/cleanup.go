package experiment

import (
	"errors"

	"github.com/wanlab/wanlab/lab"
)

// Cleanup removes what crashed experiments left behind: the labs of dead
// processes (namespaces, and with them the veths, the proxy's TUNs, rules
// and routes and any qdiscs, which all live inside them), then the proxy
// and qdisc state directories of labs that no longer exist.
func Cleanup() ([]string, error) {
	removed, err := lab.Cleanup()
	dirs, derr := lab.RemoveStaleStateDirs(StateDir, "experiment")
	return append(removed, dirs...), errors.Join(err, derr)
}
