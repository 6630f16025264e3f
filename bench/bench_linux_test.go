package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/vmtest"
)

// checkReport asserts a quick run is complete: every table has rows,
// every figure is finite, and the three outputs render.
func checkReport(t *testing.T, r *Report, tables ...string) {
	t.Helper()
	if err := r.Finite(); err != nil {
		t.Fatal(err)
	}
	have := map[string]int{}
	for _, tb := range r.Tables {
		have[tb.Name] = len(tb.Rows)
	}
	for _, name := range tables {
		if have[name] == 0 {
			t.Errorf("table %q missing or empty (have %v)", name, have)
		}
	}
	var txt, js, html bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "<svg") || !strings.HasSuffix(strings.TrimSpace(html.String()), "</html>") {
		t.Error("HTML page without inline SVG plots")
	}
	t.Logf("%s took %v\n%s", r.Bench, r.Duration, txt.String())
}

// TestQuickAccuracy runs `wanlab bench accuracy --quick --kernel`: the
// proxy's backends, the host's kernel and, for the netem it lacks, the
// reference VM's kernel (under CI always; elsewhere when the VM is
// prepared), within the 3 minutes CI allows it.
func TestQuickAccuracy(t *testing.T) {
	testenv.RequireRoot(t)
	withVM := testenv.Strict()
	if _, err := vm.LoadPrepared(""); err == nil {
		withVM = true
	}
	cfg := Config{Quick: true}
	if withVM {
		vmtest.RequireVM(t)
		cfg.Kernel, cfg.KernelVM, cfg.VMBinary, cfg.VMEngine = true, VMAuto, testenv.StaticWanlab(t), vmtest.Engine(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	r, err := Accuracy(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Minute {
		t.Errorf("quick accuracy took %v, want under 3 minutes", d)
	}
	checkReport(t, r, "delay", "loss", "rate", "other")
	paths := map[string]bool{}
	vmRows := map[string]bool{}
	for _, tb := range r.Tables {
		for _, m := range tb.Rows {
			paths[m.Path] = true
			if strings.HasPrefix(m.Path, PathKernelVM+"/") && m.NA == "" {
				vmRows[m.Label+" "+m.Metric] = true
			}
		}
	}
	for _, p := range []string{PathProxyOffload, PathProxyWater, PathKernel} {
		if !paths[p] {
			t.Errorf("no rows for path %s", p)
		}
	}
	if !withVM || !lacksNetemHere(r) {
		return
	}
	for _, want := range []string{
		"(none) delay p99", // the VM's timing noise
		"delay 10ms 1ms distribution normal delay p50", "delay 10ms 1ms distribution normal delay p99",
		"loss gemodel 1% 30% loss", "loss gemodel 1% 30% loss at the VM's netem", "duplicate 2% duplicated", "delay 10ms reorder 25% 50% gap 5 reordered",
	} {
		if !vmRows[want] {
			t.Errorf("no kernel-vm row %q", want)
		}
	}
	noise := false
	for _, n := range r.Notes {
		noise = noise || strings.Contains(n, "timing noise (empty spec)")
	}
	if !noise {
		t.Error("the VM's timing noise is not in the notes")
	}
}

// lacksNetemHere reports whether the run found no netem in the host's
// kernel (so the VM path had to run).
func lacksNetemHere(r *Report) bool {
	for _, tb := range r.Tables {
		for _, m := range tb.Rows {
			if m.Path == PathKernel && strings.Contains(m.NA, "netem") {
				return true
			}
		}
	}
	return false
}

func TestQuickForward(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Two specs of the default set, one the kernel shapes too, keep the
	// run short; the default set is the CLI's.
	shaped := "delay 1ms | tbf rate 5gbit burst 1mb limit 10mb"
	r, err := Forward(ctx, Config{Quick: true, ForwardSpecs: []string{"delay 1ms", shaped}})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, r, "forward", "forward_specs", "usage", "proxy_latency")
	specRows := map[string]bool{}
	for _, tb := range r.Tables {
		if tb.Name != "forward_specs" {
			continue
		}
		for _, m := range tb.Rows {
			specRows[m.Path+" "+m.Label] = m.NA == "" && m.Realized > 0
		}
	}
	for _, row := range []string{"proxy-offload delay 1ms, tcp 1 stream", "proxy-offload delay 1ms, tcp 4 streams",
		"proxy-offload " + shaped + ", tcp 1 stream", "kernel " + shaped + ", tcp 4 streams"} {
		if !specRows[row] {
			t.Errorf("forward_specs: no positive figure for %q (have %v)", row, specRows)
		}
	}
	for _, m := range r.Tables[0].Rows {
		if m.Realized <= 0 {
			t.Errorf("%s %s %s: %g, want a positive figure", m.Label, m.Path, m.Metric, m.Realized)
		}
	}
	// The proxy's own latency, from its stats, for both directions of
	// each proxy path; the CPU per packet of each workload.
	own, perPacket := map[string]int{}, map[string]int{}
	for _, tb := range r.Tables {
		for _, m := range tb.Rows {
			switch {
			case tb.Name == "proxy_latency" && m.Metric == "added p50":
				own[m.Path]++
				if m.Realized <= 0 {
					t.Errorf("%s %s: added p50 %g µs, want a positive bucket bound", m.Label, m.Path, m.Realized)
				}
			case tb.Name == "usage" && m.Metric == "cpu per packet":
				perPacket[m.Path]++
			}
		}
	}
	for _, p := range []string{PathProxyOffload, PathProxyOffload1, PathProxyOffloadCPU, PathProxyWater} {
		if own[p] != 2 || perPacket[p] != 4 {
			t.Errorf("%s: %d directions of added latency (want 2), %d workloads with a CPU per packet (want 4)", p, own[p], perPacket[p])
		}
	}
}

func TestQuickSweep(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Sweep(ctx, Config{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, r, "loss", "delay", "seed000", "seed001")
	for _, tb := range r.Tables {
		for _, m := range tb.Rows {
			if m.NA == "" && m.Realized <= 0 {
				t.Errorf("%s %s: throughput %g, want positive", tb.Name, m.Label, m.Realized)
			}
		}
	}
}
