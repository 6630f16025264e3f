package tap_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"net/netip"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// BenchmarkForwardingTap measures what the tap costs the forwarder: TCP
// downloads through the proxy on a client-router-server lab, without and
// with --pcap to a file (full packets, or 128 bytes of each), for an empty
// spec and for a 1 gbit tbf. It reports the share of tap records lost
// because the writer fell behind. WANLAB_TAP_DIR puts the file elsewhere
// (e.g. /dev/shm) to tell the disk's share from the tap's.
//
//	go test -run XXX -bench ForwardingTap -benchtime 4x ./proxy/tap
func BenchmarkForwardingTap(b *testing.B) {
	testenv.RequireRoot(b)
	l, err := lab.New(context.Background(), lab.Config{})
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			testenv.Skip(b, "cannot build a lab: %v (needs CAP_NET_ADMIN)", err)
		}
		b.Fatal(err)
	}
	defer l.Close()
	srv, err := traffic.StartServer(context.Background(), l.Server.Handle,
		traffic.ServerConfig{Listen: netip.AddrPortFrom(l.Server.IPv4, 0)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ifaces := [2]string{l.Router.ClientLink, l.Router.ServerLink}

	for _, bc := range []struct {
		name string
		spec string
		tap  bool
		snap int
	}{
		{"spec=none/tap=off", "", false, 0},
		{"spec=none/tap=on", "", true, tap.DefaultSnapLen},
		{"spec=none/tap=snap128", "", true, 128},
		{"spec=tbf1gbit/tap=off", "tbf rate 1gbit burst 256kb limit 4mb", false, 0},
		{"spec=tbf1gbit/tap=on", "tbf rate 1gbit burst 256kb limit 4mb", true, tap.DefaultSnapLen},
		{"spec=tbf1gbit/tap=snap128", "tbf rate 1gbit burst 256kb limit 4mb", true, 128},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := proxy.Config{Ifaces: ifaces, Specs: [2]spec.Impairment{spec.PipelineImpairment(spec.MustParse(bc.spec)), spec.PipelineImpairment(spec.MustParse(bc.spec))}, Netns: l.Router.NS,
				StateDir: b.TempDir()}
			var tp *tap.Tap
			if bc.tap {
				dir := b.TempDir()
				if d := os.Getenv("WANLAB_TAP_DIR"); d != "" {
					dir = d
				}
				f, err := os.Create(filepath.Join(dir, "tap.pcapng"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if tp, err = tap.New(f, 0, ifaces[:], tap.WithSnapLen(bc.snap)); err != nil {
					b.Fatal(err)
				}
				cfg.Tap = tp
			}
			p, err := proxy.Start(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			const size = 128 * units.MiB
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := traffic.Download(context.Background(), l.Client.Handle,
					traffic.DownloadConfig{Server: srv.Addr(), Size: size}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := p.Close(); err != nil {
				b.Fatal(err)
			}
			if tp != nil {
				if err := tp.Close(); err != nil {
					b.Fatal(err)
				}
				st := tp.Stats()
				b.ReportMetric(100*float64(st.RingFull)/float64(st.Records+st.RingFull), "%tap-lost")
			}
		})
	}
}
