package experiment

import (
	"errors"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tuner"
)

// Cleanup removes what crashed experiments left behind: the labs of dead
// processes (namespaces, and with them the veths, the proxy's TUNs, rules
// and routes and any qdiscs, which all live inside them), then the proxy
// and qdisc state directories of labs that no longer exist, the reference
// VMs (lab/vm) of dead owners (their qemu and state directory), and the
// tuner's backups and lock files of namespaces that no longer exist.
func Cleanup() ([]string, error) {
	removed, err := lab.Cleanup()
	dirs, derr := lab.RemoveStaleStateDirs(StateDir, "experiment")
	vms, verr := vm.Cleanup()
	tunes, terr := tuner.RemoveStale("", nsrun.Exists)
	removed = append(append(append(removed, dirs...), vms...), tunes...)
	return removed, errors.Join(err, derr, verr, terr)
}
