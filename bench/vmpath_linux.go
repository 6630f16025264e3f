package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tc/kernel"
	"github.com/wanlab/wanlab/units"
)

// The reference VM's two links to the router: traffic from the client
// toward the server is routed into the VM on vmIn (guest eth0), forwarded
// by the guest's kernel and impaired by its qdiscs on eth1, and comes back
// on vmOut, from where the router forwards it to the server as usual. The
// other direction does not pass through the VM.
const (
	vmInTap, vmOutTap = "wlvm-in", "wlvm-out"
	vmRouteTable      = 201
)

var (
	vmInNet  = netip.MustParsePrefix("10.250.0.0/30") // router .1, guest eth0 .2
	vmOutNet = netip.MustParsePrefix("10.250.0.4/30") // router .5, guest eth1 .6
)

// kernelVMPath runs each spec as qdiscs of the reference VM's kernel
// (lab/vm), for what the host kernel lacks (sch_netem).
type kernelVMPath struct {
	name string
	ctx  context.Context
	v    *vm.VM
	e    *env
	rule *netlink.Rule
	// boots is how many boots it took to get a guest whose NICs carry
	// frames (openKernelVM).
	boots int
}

// errGuestNICs is a guest that answers its agent but whose NICs carry no
// frame: seen here now and then on User-Mode Linux (its TAPs receive
// nothing, the router's ARP goes unanswered), on old and new builds alike.
var errGuestNICs = errors.New("the guest's NICs carry no frames")

// openKernelVM boots the reference VM as bootKernelVM does, and boots it
// again (up to three times in all) when its NICs carry no frames, which
// the run would otherwise measure as a path that loses every probe.
func (e *env) openKernelVM(ctx context.Context) (*kernelVMPath, error) {
	for boot := 1; ; boot++ {
		p, err := e.bootKernelVM(ctx)
		if err == nil {
			p.boots = boot
			return p, nil
		}
		if !errors.Is(err, errGuestNICs) || boot == 3 {
			return nil, err
		}
	}
}

// waitNICs waits, at most 10 s, until the guest reaches the router on
// both of its links (one ping each way out of eth0 and eth1).
func (p *kernelVMPath) waitNICs(ctx context.Context, addrs ...netip.Addr) error {
	script := ""
	for _, a := range addrs {
		if script != "" {
			script += " && "
		}
		script += "ping -c 1 -W 1 " + a.String() + " >/dev/null"
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := p.v.Run(ctx, "sh", "-c", script)
		if err == nil && res.ExitCode == 0 {
			return nil
		}
		if err != nil && ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: no answer from %v within 10 s", errGuestNICs, addrs)
		}
		select { // a pause, so that a ping that fails at once does not spin
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// bootKernelVM boots the VM on two TAPs in the router namespace and routes
// the client's traffic toward the server through it.
func (e *env) bootKernelVM(ctx context.Context) (*kernelVMPath, error) {
	r := &e.lab.Router
	in, out := lab.HostAddr(vmInNet, 1), lab.HostAddr(vmOutNet, 1)
	engine := e.cfg.VMEngine
	if engine == vm.EngineAuto {
		var err error
		if engine, _, err = vm.ChooseEngine(ctx, ""); err != nil {
			return nil, fmt.Errorf("%s: %w", PathKernelVM, err)
		}
	}
	v, err := vm.Boot(ctx, vm.Config{Binary: e.cfg.VMBinary, Engine: engine, Netns: r.NS, NICs: []vm.NIC{
		{Tap: vmInTap, Addr: netip.PrefixFrom(lab.HostAddr(vmInNet, 2), vmInNet.Bits())},
		{Tap: vmOutTap, Addr: netip.PrefixFrom(lab.HostAddr(vmOutNet, 2), vmOutNet.Bits())},
	}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PathKernelVM, err)
	}
	p := &kernelVMPath{name: PathKernelVM + "/" + string(v.Engine), ctx: ctx, v: v, e: e}
	fail := func(err error) (*kernelVMPath, error) {
		p.Close()
		return nil, fmt.Errorf("%s: %w", PathKernelVM, err)
	}
	// The guest forwards toward the server out of eth1; rp_filter off so
	// that the client's packets may arrive on eth0 and, at the router,
	// come back on the TAP of eth1.
	guest := fmt.Sprintf("echo 1 > /proc/sys/net/ipv4/ip_forward && "+
		"for f in /proc/sys/net/ipv4/conf/*/rp_filter; do echo 0 > $f; done && "+
		"ip route add %s via %s dev eth1 && ip route add %s via %s dev eth0",
		e.lab.Server.Net4, out, e.lab.Client.Net4, in)
	if res, err := v.Run(ctx, "sh", "-c", guest); err != nil || res.ExitCode != 0 {
		return fail(fmt.Errorf("guest routing: %v %s", err, strings.TrimSpace(string(res.Stderr))))
	}
	if err := lab.WriteSysctls(r.NS, map[string]string{
		"net.ipv4.conf.all.rp_filter":                  "0",
		"net.ipv4.conf." + vmOutTap + ".rp_filter":     "0",
		"net.ipv4.conf." + r.ClientLink + ".rp_filter": "0",
	}); err != nil {
		return fail(err)
	}
	err = nsrun.Do(r.Handle, func() error {
		for _, a := range []struct {
			link string
			addr netip.Addr
			net  netip.Prefix
		}{{vmInTap, in, vmInNet}, {vmOutTap, out, vmOutNet}} {
			l, err := netlink.LinkByName(a.link)
			if err != nil {
				return err
			}
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.addr.AsSlice(), Mask: net.CIDRMask(a.net.Bits(), 32)}}); err != nil {
				return fmt.Errorf("address on %s: %w", a.link, err)
			}
			// The guest stops for tens of milliseconds when the host is
			// busy (emulation above all); a TAP's 500-packet queue would
			// then drop what the spec does not. 50000 packets hold 10 s
			// of the loss probes.
			if err := netlink.LinkSetTxQLen(l, 50000); err != nil {
				return fmt.Errorf("queue length of %s: %w", a.link, err)
			}
		}
		l, err := netlink.LinkByName(vmInTap)
		if err != nil {
			return err
		}
		dst := e.lab.Server.Net4
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Table: vmRouteTable,
			Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)}, Gw: lab.HostAddr(vmInNet, 2).AsSlice()}); err != nil {
			return fmt.Errorf("route via the VM: %w", err)
		}
		rule := netlink.NewRule()
		rule.IifName, rule.Table, rule.Priority, rule.Family = r.ClientLink, vmRouteTable, 1000, familyV4
		if err := netlink.RuleAdd(rule); err != nil {
			return fmt.Errorf("rule iif %s: %w", r.ClientLink, err)
		}
		p.rule = rule
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if err := p.waitNICs(ctx, in, out); err != nil {
		return fail(err)
	}
	return p, nil
}

// familyV4 is AF_INET.
const familyV4 = 2

func (p *kernelVMPath) Name() string { return p.name }

// Set applies toServer inside the VM on eth1 with wanlab kernel apply;
// the VM does not carry the other direction.
func (p *kernelVMPath) Set(toServer, toClient string) error {
	if toClient != "" {
		return fmt.Errorf("%s: impairs only toward the server", p.name)
	}
	argv := []string{"wanlab", "kernel", "clear", "--iface", "eth1"}
	if toServer != "" {
		argv = []string{"wanlab", "kernel", "apply", "--iface", "eth1", toServer}
	}
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	r, err := p.v.Run(ctx, argv...)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	switch r.ExitCode {
	case 0:
		return nil
	case 4: // the guest kernel lacks it too
		return fmt.Errorf("%s: %s: %w", p.name, strings.TrimSpace(string(r.Stderr)), kernel.ErrNotSupported)
	}
	return fmt.Errorf("%s: %s: exit %d: %s", p.name, strings.Join(argv[:3], " "), r.ExitCode, strings.TrimSpace(string(r.Stderr)))
}

// qdiscCounters reads the counters of the root qdisc on the guest's eth1
// (kernel show --json), which count what the guest's netem itself did,
// whatever the VM lost before it when the host was too busy to run it.
func (p *kernelVMPath) qdiscCounters() (kernel.Counters, error) {
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	r, err := p.v.Run(ctx, "wanlab", "kernel", "show", "--iface", "eth1", "--json")
	if err != nil {
		return kernel.Counters{}, fmt.Errorf("%s: %w", p.name, err)
	}
	var show struct {
		Stages []kernel.StageStats `json:"stages"`
	}
	if err := json.Unmarshal(r.Stdout, &show); err != nil || len(show.Stages) == 0 {
		return kernel.Counters{}, fmt.Errorf("%s: kernel show --json: exit %d %v: %s", p.name, r.ExitCode, err, strings.TrimSpace(string(r.Stderr)))
	}
	return show.Stages[0].Counters, nil
}

func (p *kernelVMPath) Usage() (time.Duration, units.Size, string, error) {
	return 0, 0, "reference VM (" + string(p.v.Engine) + ", not attributed)", nil
}

func (p *kernelVMPath) Close() error {
	var errs []error
	if p.rule != nil {
		errs = append(errs, nsrun.Do(p.e.lab.Router.Handle, func() error { return netlink.RuleDel(p.rule) }))
		p.rule = nil
	}
	if p.v != nil {
		errs = append(errs, p.v.Close())
		p.v = nil
	}
	return errors.Join(errs...)
}
