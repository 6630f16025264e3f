package experiment

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/pair"
	"github.com/wanlab/wanlab/tc/kernel"
	"github.com/wanlab/wanlab/tc/spec"
)

// ErrNoKernelSupport wraps kernel.ErrNotSupported for callers that map it
// to an exit code.
var ErrNoKernelSupport = kernel.ErrNotSupported

// kernelImpairment is the same specs as qdiscs: on the router's veths or
// TAPs (targets) and, between VMs, for the directions this host's kernel
// cannot shape, in the sending VM (guest: startVMKernel).
type kernelImpairment struct {
	targets map[string]kernel.Target
	guest   map[string]*vm.VM
	// offloads are the guests' NIC offloads before the qdiscs went on
	// (pair.SetOffloads), by direction, restored in Stop.
	offloads map[string]guestOffloads
	specs    map[string]*spec.Spec
	where    string // for Describe, after "kernel qdiscs"

	once  sync.Once
	stats *ImpairStats
	err   error
}

// guestOffloads is a guest's NIC offloads before the qdiscs went on.
type guestOffloads struct {
	vm *vm.VM
	on map[string]int
}

func startKernel(_ context.Context, l *lab.Lab, specs map[string]*spec.Spec) (impairment, error) {
	dir := filepath.Join(StateDir, l.ID)
	if err := hostfile.Dir(dir); err != nil {
		return nil, fmt.Errorf("kernel qdisc state: %w", err)
	}
	ki := &kernelImpairment{targets: map[string]kernel.Target{}, specs: specs, where: " on the router's veths"}
	for _, d := range []string{ToClient, ToServer} {
		if specs[d].IsEmpty() {
			continue
		}
		t := kernel.Target{Iface: egress(l, d), Netns: l.Router.NS, StateDir: dir}
		if err := kernel.Apply(t, spec.PipelineImpairment(specs[d])); err != nil {
			_, cerr := ki.Stop()
			return nil, errors.Join(fmt.Errorf("--kernel %s on %s: %w", d, t.Iface, err), cerr)
		}
		ki.targets[d] = t
	}
	return ki, nil
}

func (ki *kernelImpairment) Mode() string { return "kernel" }

func (ki *kernelImpairment) Describe() string {
	return "kernel qdiscs" + ki.where + "; " + describe(ki.specs)
}

func (ki *kernelImpairment) Stop() (*ImpairStats, error) {
	ki.once.Do(func() {
		st := &ImpairStats{Kernel: map[string]string{}}
		var errs []error
		for d, t := range ki.targets {
			if shown, err := kernel.Show(t); err == nil {
				st.Kernel[d] = shown
			}
			if err := kernel.Clear(t); err != nil {
				errs = append(errs, fmt.Errorf("clear qdiscs on %s: %w", t.Iface, err))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for d, g := range ki.guest {
			if out, err := pair.Output(ctx, g, "wanlab", "kernel", "show", "--iface", "eth0"); err == nil {
				st.Kernel[d] = "in the VM: " + strings.TrimSpace(string(out))
			}
			if _, err := pair.Output(ctx, g, "wanlab", "kernel", "clear", "--iface", "eth0"); err != nil {
				errs = append(errs, fmt.Errorf("clear qdiscs in the VM: %w", err))
			}
		}
		for _, before := range ki.offloads {
			restore := map[string]int{"tso": before.on["tso"], "gso": before.on["gso"], "gso_max_segs": before.on["gso_max_segs"]}
			if _, err := pair.SetOffloads(ctx, before.vm, "eth0", restore); err != nil {
				errs = append(errs, fmt.Errorf("restore the VM's offloads: %w", err))
			}
		}
		ki.stats, ki.err = st, errors.Join(errs...)
	})
	return ki.stats, ki.err
}
