package bench

import (
	"errors"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/vm"
)

// Cleanup removes what a killed bench left behind: the labs of dead
// processes (namespaces, and with them the veths, the proxy's TUNs, rules
// and qdiscs, which all live inside them), then the state directories
// under StateDir of labs that no longer exist, and the reference VMs of
// dead owners.
func Cleanup() ([]string, error) {
	return cleanupIn(StateDir)
}

func cleanupIn(stateDir string) ([]string, error) {
	removed, err := lab.Cleanup()
	dirs, derr := lab.RemoveStaleStateDirs(stateDir, "bench")
	vms, verr := vm.Cleanup()
	return append(append(removed, dirs...), vms...), errors.Join(err, derr, verr)
}
