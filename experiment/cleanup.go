package experiment

import (
	"errors"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/vm"
)

// Cleanup removes what crashed experiments left behind: the labs of dead
// processes (namespaces, and with them the veths, the proxy's TUNs, rules
// and routes and any qdiscs, which all live inside them), then the proxy
// and qdisc state directories of labs that no longer exist, and the
// reference VMs (lab/vm) of dead owners: their qemu and state directory.
func Cleanup() ([]string, error) {
	removed, err := lab.Cleanup()
	dirs, derr := lab.RemoveStaleStateDirs(StateDir, "experiment")
	vms, verr := vm.Cleanup()
	return append(append(removed, dirs...), vms...), errors.Join(err, derr, verr)
}
