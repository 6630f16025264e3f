// Package pair boots the two end hosts of a lab as VMs (lab/vm) on TAPs of
// its router namespace, and drives them over their agents: the guests'
// sysctls, a traffic server, a download, a request/response load, a ping.
// The experiments and the benchmarks between two VMs both stand on it.
package pair

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/units"
)

// Config chooses how the two end-host VMs are booted.
type Config struct {
	// Binary is the static wanlab run inside (empty: this executable).
	Binary string
	// Engine runs the guests (EngineAuto: vm.ChooseEngine); MemoryMB is
	// each guest's RAM (0: 1024: the guest kernel sizes tcp_mem from it).
	Engine   vm.Engine
	MemoryMB int
	// MTU of the TAPs and the guests' NICs (0: 1500).
	MTU int
	// CPU is the model emulated under TCG (empty: qemu's "max"). A plain
	// "qemu64" carries 1.5-2x the throughput between two emulated guests
	// (no AVX copies and checksums to emulate), but then the handshake
	// timing at the server's TAP makes the analyzer take that capture for
	// one near the receiver, and the receive-window scenario is diagnosed
	// bandwidth limited with a doubled path RTT: left as an option.
	CPU string
	// Log receives one line per step (nil: discarded).
	Log io.Writer
}

// VMs is a lab between two VMs: the router namespace
// on this host (a RouterOnly lab) holding one TAP per VM, the client VM on
// the router's client-side TAP and the server VM on its server-side one,
// with the lab's address plan (IPv4 and IPv6) on both ends. Several
// experiments may run on one VMs in turn (experiment.RunOn); each restores
// the guests' sysctls and qdiscs when it ends.
type VMs struct {
	Lab            *lab.Lab
	Client, Server *vm.VM
	MTU            int
	// Boot is the wall time from the first qemu to both agents' hello
	// (the VMs boot in parallel).
	Boot time.Duration

	closeOnce sync.Once
	closeErr  error
}

// tapQueue is the TAPs' transmit queue: an emulated guest stops for tens
// of milliseconds when the host is busy, and the 1000 packets of a TAP's
// default queue would then drop what the spec does not.
const tapQueue = 10000

// Boot builds the router namespace and boots the two VMs in it. On error
// nothing is left.
func Boot(ctx context.Context, c Config) (_ *VMs, err error) {
	if c.MemoryMB == 0 {
		c.MemoryMB = 1024
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Engine == vm.EngineAuto {
		e, reason, err := vm.ChooseEngine(ctx, "")
		if err != nil {
			return nil, err
		}
		c.Engine = e
		fmt.Fprintf(c.Log, "VMs: engine %s\n", reason)
	}
	if c.Engine != vm.EngineUML {
		if _, err := vm.LoadPrepared(""); err != nil {
			return nil, err
		}
	} else if c.MTU > vm.UMLMaxMTU {
		return nil, umlMTUError(c.MTU)
	}
	l, err := lab.New(ctx, lab.Config{RouterOnly: true, MTU: c.MTU})
	if err != nil {
		return nil, err
	}
	v := &VMs{Lab: l, MTU: c.MTU}
	defer func() {
		if err != nil {
			err = errors.Join(err, v.Close())
		}
	}()
	began := time.Now()
	var wg sync.WaitGroup
	var cerr, serr error
	for _, h := range []struct {
		host *lab.Host
		tap  string
		dst  **vm.VM
		err  *error
	}{{&l.Client, l.Router.ClientLink, &v.Client, &cerr}, {&l.Server, l.Router.ServerLink, &v.Server, &serr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			*h.dst, *h.err = vm.Boot(ctx, vm.Config{Binary: c.Binary, Engine: c.Engine, MemoryMB: c.MemoryMB, CPU: c.CPU,
				Netns: l.Router.NS, NICs: []vm.NIC{{Tap: h.tap, Addr: netip.PrefixFrom(h.host.IPv4, h.host.Net4.Bits())}},
				Gateway: h.host.GatewayIPv4})
			if *h.err != nil {
				*h.err = fmt.Errorf("%s VM: %w", h.host.Role, *h.err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(cerr, serr); err != nil {
		return nil, err
	}
	v.Boot = time.Since(began)
	fmt.Fprintf(c.Log, "VMs: %s under %s, booted in %.1f s (client %.1f s, server %.1f s)\n", v.Client.Hello.Release, v.Client.Engine,
		v.Boot.Seconds(), v.Client.BootTime.Seconds(), v.Server.BootTime.Seconds())
	if err := l.AttachRouterLinks(ctx); err != nil {
		return nil, err
	}
	if err := v.setTaps(func(link netlink.Link) error { return netlink.LinkSetTxQLen(link, tapQueue) }, "queue length of %s"); err != nil {
		return nil, err
	}
	for _, g := range []struct {
		v *vm.VM
		h *lab.Host
	}{{v.Client, &l.Client}, {v.Server, &l.Server}} {
		// IPv6 without duplicate address detection, as the lab's hosts;
		// the MTU on the guest's side of the TAP.
		script := fmt.Sprintf("/usr/sbin/ip link set eth0 mtu %d && /usr/sbin/ip -6 addr add %s dev eth0 nodad && /usr/sbin/ip -6 route add default via %s dev eth0",
			c.MTU, netip.PrefixFrom(g.h.IPv6, g.h.Net6.Bits()), g.h.GatewayIPv6)
		if err := Shell(ctx, g.v, script); err != nil {
			return nil, fmt.Errorf("%s VM network: %w", g.h.Role, err)
		}
	}
	return v, nil
}

// Close stops both VMs and removes the router namespace.
func (v *VMs) Close() error {
	v.closeOnce.Do(func() {
		var errs []error
		for _, g := range []*vm.VM{v.Client, v.Server} {
			if g != nil {
				errs = append(errs, g.Close())
			}
		}
		if v.Lab != nil {
			errs = append(errs, v.Lab.Close())
		}
		v.closeErr = errors.Join(errs...)
	})
	return v.closeErr
}

// SetMTU sets the MTU of both TAPs and of both guests' NICs, for the
// experiments that follow.
func (v *VMs) SetMTU(ctx context.Context, mtu int) error {
	if v.Client.Engine == vm.EngineUML && mtu > vm.UMLMaxMTU {
		return umlMTUError(mtu)
	}
	if err := v.setTaps(func(link netlink.Link) error { return netlink.LinkSetMTU(link, mtu) }, fmt.Sprintf("MTU %d on %%s", mtu)); err != nil {
		return err
	}
	for _, g := range []*vm.VM{v.Client, v.Server} {
		if err := Shell(ctx, g, fmt.Sprintf("/usr/sbin/ip link set eth0 mtu %d", mtu)); err != nil {
			return err
		}
	}
	v.MTU = mtu
	return nil
}

// setTaps runs set on both TAPs of the router; an error names the TAP in
// what (a format with one %s).
func (v *VMs) setTaps(set func(netlink.Link) error, what string) error {
	r := &v.Lab.Router
	return nsrun.Do(r.Handle, func() error {
		for _, name := range []string{r.ClientLink, r.ServerLink} {
			link, err := netlink.LinkByName(name)
			if err == nil {
				err = set(link)
			}
			if err != nil {
				return fmt.Errorf(what+": %w", name, err)
			}
		}
		return nil
	})
}

func umlMTUError(mtu int) error {
	return fmt.Errorf("MTU %d: UML's NIC (the vector driver) takes at most %d: use --engine kvm or tcg for jumbo frames", mtu, vm.UMLMaxMTU)
}

// Serve starts the traffic server in the server VM on port 80 (of its
// IPv6 address with ipv6) and returns its address and the function that
// stops it.
func (v *VMs) Serve(ctx context.Context, ipv6 bool) (netip.AddrPort, func() error, error) {
	a := v.Lab.Server.IPv4
	if ipv6 {
		a = v.Lab.Server.IPv6
	}
	s, err := StartServer(ctx, v.Server, traffic.ServerConfig{Listen: netip.AddrPortFrom(a, 80)})
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	return s.Addr, func() error { return s.Stop(context.WithoutCancel(ctx)) }, nil
}

// Download fetches size bytes of a generated file from server (Serve) in
// the client VM, without captures or analysis.
func (v *VMs) Download(ctx context.Context, server netip.AddrPort, size units.Size) (*traffic.DownloadResult, error) {
	return Download(ctx, v.Client, GuestDownload{Server: server, Size: size}, nil)
}

// Ping returns the median round trip of n pings from the client VM to
// the server VM's IPv4 address.
func (v *VMs) Ping(ctx context.Context, n int) (time.Duration, error) {
	return Ping(ctx, v.Client, v.Lab.Server.IPv4, n)
}
