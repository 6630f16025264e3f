package bench

import (
	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/proxy/cpulatency"
)

// StateDir holds, per lab, the route and qdisc state files of a bench
// run (StateDir/<lab id>/); everything they describe lives in the lab's
// router namespace and goes with it.
const StateDir = host.RunDir + "/bench"

// Config is shared by the three benches.
type Config struct {
	// Quick runs the short variant (under a minute, for CI).
	Quick bool
	// Specs replaces the accuracy grid (one spec per entry).
	Specs []string
	// ForwardSpecs are the impairments the forwarding bench sends its TCP
	// bulk through (the data direction, client to server), each parsed
	// already (spec.Parse) and in its canonical text; nil means
	// DefaultForwardSpecs. "" is the empty spec.
	ForwardSpecs []string
	// Kernel makes the sweep run the specs as kernel qdiscs instead of
	// through the userspace proxy; in the accuracy bench it adds the
	// reference VM's kernel (KernelVM) and the netem cases only it can
	// run here (duplicate, corrupt, reorder with gap, netem rate, slot,
	// the 4-state loss model).
	Kernel bool
	// KernelVM chooses when the accuracy bench runs the kernel path in the
	// reference VM (lab/vm): VMAuto where the host's kernel has no netem,
	// VMOn always, VMOff never.
	KernelVM VMMode
	// VMBinary is the wanlab executable the VM runs; empty means
	// this process's own.
	VMBinary string
	// VMs makes the forwarding bench run between two VMs
	// (lab/vm/pair) instead of two namespaces.
	VMs bool
	// VMEngine runs the VMs (the accuracy bench's reference VM, the
	// forwarding bench's two): vm.EngineAuto chooses (vm.ChooseEngine).
	VMEngine vm.Engine
	// ProxyExec, when set, runs the proxy as a child process, this
	// command line followed by the `wanlab proxy` flags (the CLI passes
	// its own executable and "proxy"), so its CPU time and memory can be
	// measured apart from the traffic generators. Empty: in-process.
	ProxyExec []string
	// Realtime runs the proxy's release loops under SCHED_FIFO
	// (proxy.Config.Realtime, `wanlab proxy --realtime`).
	Realtime bool
	// LowLatency is the proxy's CPU wake-up latency mode
	// (proxy.Config.LowLatency, `wanlab proxy --low-latency`); empty: the
	// proxy's default (auto).
	LowLatency cpulatency.Mode
	// Progress, if set, is called before each step.
	Progress func(done, total int, step string)
	// Command is recorded in the report.
	Command string
}

// DefaultForwardSpecs is the forwarding bench's spec set: the empty spec,
// a fixed delay, the same with a limit that holds what a veth sends in
// its 1 ms (netem's default 1000 segments hold 1 ms at 12 Gbit/s, and
// their drops are the spec's, not the forwarding's), random loss, a
// jitter, a token bucket the kernel can run too, and a delay in front of
// that bucket (compared with the kernel's bucket alone: this kernel has
// no netem).
var DefaultForwardSpecs = []string{
	"",
	"delay 1ms",
	"delay 1ms limit 10000",
	"loss 0.1%",
	"delay 5ms 1ms",
	"tbf rate 5gbit burst 1mb limit 10mb",
	"delay 1ms | tbf rate 5gbit burst 1mb limit 10mb",
}

func (c Config) progress(done, total int, step string) {
	if c.Progress != nil {
		c.Progress(done, total, step)
	}
}

// VMMode is Config.KernelVM.
type VMMode string

const (
	VMAuto VMMode = "auto"
	VMOn   VMMode = "on"
	VMOff  VMMode = "off"
)
