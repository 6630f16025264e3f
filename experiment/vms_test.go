package experiment

import (
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

func TestHostInfoString(t *testing.T) {
	if s := (HostInfo{Kernel: "6.18.44"}).String(); s != "6.18.44 (namespace of this host)" {
		t.Errorf("namespace: %q", s)
	}
	if s := (HostInfo{Kernel: "6.1.0-57-cloud-amd64", VM: true, Engine: "tcg", Boot: 4800 * time.Millisecond}).String(); s != "6.1.0-57-cloud-amd64 (VM, tcg, booted in 4.8 s)" {
		t.Errorf("VM: %q", s)
	}
	if s := (HostInfo{Kernel: "6.1.176", VM: true, Engine: "uml", Boot: 1600 * time.Millisecond}).String(); s != "6.1.176 (VM, uml, booted in 1.6 s)" {
		t.Errorf("UML VM: %q", s)
	}
}

func TestGuestCPUWarning(t *testing.T) {
	res := &Result{
		Hosts:    map[string]HostInfo{lab.RoleClient: {VM: true, Engine: "tcg"}},
		Download: &traffic.DownloadResult{Transfer: 240 * units.Mbit, Server: &sockopt.TCPInfo{BusyTime: time.Second}},
		Captures: map[string]*CaptureResult{SideServer: {Diagnosis: &analyzer.Diagnosis{Limit: analyzer.LimitBandwidth}}},
	}
	if w := guestCPUWarning(res); !strings.Contains(w, "guests' CPUs") {
		t.Errorf("unlimited download under tcg: %q", w)
	}
	res.Captures[SideServer].Diagnosis.Limit = analyzer.LimitReceiveWindow
	if w := guestCPUWarning(res); w != "" {
		t.Errorf("receive-window limited: %q", w)
	}
	res.Captures[SideServer].Diagnosis.Limit = analyzer.LimitBandwidth
	for _, e := range []string{"kvm", "uml"} {
		res.Hosts[lab.RoleClient] = HostInfo{VM: true, Engine: e}
		if w := guestCPUWarning(res); w != "" {
			t.Errorf("%s: %q", e, w)
		}
	}
}
