package experiment

import (
	"context"
	"fmt"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/spec"
)

// ImpairStats are the impairment's counters at the end.
type ImpairStats struct {
	// Proxy holds the userspace proxy's counters per egress interface
	// (the router's client-side veth carries ToClient).
	Proxy *control.Stats `json:"proxy,omitempty"`
	// Kernel holds, per direction, the qdisc chain the kernel reported
	// back in spec form before it was cleared.
	Kernel map[string]string `json:"kernel,omitempty"`
	// Tap is the proxy's own capture (packets as they entered and left
	// the engine, drops marked), if any.
	Tap string `json:"tap,omitempty"`
}

// impairment shapes the lab's router and undoes it on Stop.
type impairment interface {
	Mode() string     // "proxy", "kernel" or "routing"
	Describe() string // one line for the log
	// Stop removes the impairment and returns its counters; a second
	// call returns nil, nil.
	Stop() (*ImpairStats, error)
}

// startImpairment sets the specs up on the router: through the userspace
// proxy, or with Kernel as qdiscs (where ep puts them). With no spec and
// no Kernel the router just routes.
func startImpairment(ctx context.Context, ep endpoints, l *lab.Lab, cfg Config, specs map[string]*spec.Spec, out string) (impairment, error) {
	if cfg.Kernel {
		return ep.startKernel(ctx, specs)
	}
	if !needsProxy(cfg, specs) {
		return routing{}, nil
	}
	return startProxy(ctx, l, cfg, specs, out)
}

// needsProxy reports whether the router runs the proxy (without Kernel):
// asked to, or a spec or a schedule to apply.
func needsProxy(cfg Config, specs map[string]*spec.Spec) bool {
	return cfg.Proxy || !specs[ToClient].IsEmpty() || !specs[ToServer].IsEmpty() || len(cfg.Schedule) > 0
}

// routing is the router without impairment: kernel forwarding only.
type routing struct{}

func (routing) Mode() string                { return "routing" }
func (routing) Describe() string            { return "none (kernel routing)" }
func (routing) Stop() (*ImpairStats, error) { return nil, nil }

// egress maps a direction to the router's interface it leaves through.
func egress(l *lab.Lab, dir string) string {
	if dir == ToClient {
		return l.Router.ClientLink
	}
	return l.Router.ServerLink
}

func describe(specs map[string]*spec.Spec) string {
	return fmt.Sprintf("%s: %q, %s: %q", ToClient, specs[ToClient].String(), ToServer, specs[ToServer].String())
}
