package experiment

import (
	"strings"
	"testing"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/proxy/spec"
	"github.com/wanlab/wanlab/tuner"
)

// TestOnePredictionPerChange: the tuner's plan and the diagnosis both
// predict the rate after raising the receive buffer; the advice prints one.
func TestOnePredictionPerChange(t *testing.T) {
	dg := &analyzer.Diagnosis{Limit: analyzer.LimitReceiveWindow, Advice: []string{
		"raise the receive buffer on 10.0.0.2: net.ipv4.tcp_rmem max >= 16777216 bytes",
		"predicted: a 8 MiB window allows up to 1.92Gbit/s (240 MB/s) at this RTT",
	}}
	r := &Result{Captures: map[string]*CaptureResult{SideServer: {Diagnosis: dg}}}
	if got := advice(r); len(got) != 2 {
		t.Fatalf("without a plan the diagnosis's prediction stays: %q", got)
	}
	r.Tuning = &Tuning{Client: []tuner.Change{{Key: "net.ipv4.tcp_rmem", From: "4096 131072 6291456", To: "4096 131072 16777216"}},
		Current: 360e6, After: 1.9e9, Rerun: "wanlab experiment --client-sysctl 'net.ipv4.tcp_rmem=4096 131072 16777216'"}
	got := advice(r)
	n := 0
	for _, a := range got {
		if strings.Contains(a, "predicted:") || strings.Contains(a, "would go from") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d predictions for one change:\n%s", n, strings.Join(got, "\n"))
	}
	// The tuner's lines are the only ones naming tcp_rmem: the
	// diagnosis's (with its default window share) is left out.
	k := 0
	for _, a := range got {
		if strings.Contains(a, "net.ipv4.tcp_rmem") && !strings.HasPrefix(a, "tuner: ") {
			k++
		}
	}
	if k != 0 {
		t.Errorf("%d advice lines for net.ipv4.tcp_rmem, want the tuner's alone:\n%s", k, strings.Join(got, "\n"))
	}
}

// TestNeedsProxy: a schedule alone starts the proxy, in the namespace and
// the VM runs alike (they decide by the same function).
func TestNeedsProxy(t *testing.T) {
	none := map[string]*spec.Spec{}
	delay := map[string]*spec.Spec{ToClient: spec.MustParse("delay 10ms")}
	for _, c := range []struct {
		cfg   Config
		specs map[string]*spec.Spec
		want  bool
	}{
		{Config{}, none, false},
		{Config{Proxy: true}, none, true},
		{Config{}, delay, true},
		{Config{Schedule: map[string]string{ToServer: "0s delay 20ms\nend\n"}}, none, true},
	} {
		if got := needsProxy(c.cfg, c.specs); got != c.want {
			t.Errorf("needsProxy(%+v, %v) = %v, want %v", c.cfg, c.specs, got, c.want)
		}
	}
}
