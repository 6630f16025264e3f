package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateSimulateGolden = flag.Bool("update-simulate", false, "rewrite testdata/simulate/*.golden")

// runWanlab runs the app with args and returns stdout and the exit code
// main would use.
func runWanlab(t *testing.T, args ...string) (string, int) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	app.ErrWriter = &out
	err := runCommandLine(context.Background(), app, append([]string{"wanlab"}, args...))
	if err != nil {
		out.WriteString("error: " + err.Error() + "\n")
		return out.String(), exitCode(err)
	}
	return out.String(), exitOK
}

func TestSimulateGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"seed002", []string{"--spec", "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb", "--packets", "20000", "--pps", "4000"}},
		{"netem", []string{"--spec", "delay 50ms 10ms distribution normal loss 1% duplicate 0.5% corrupt 0.1% reorder 2%", "--packets", "20000", "--pps", "2000", "--size", "1000", "--seed", "7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := runWanlab(t, append([]string{"simulate"}, c.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, out)
			}
			golden := filepath.Join("testdata", "simulate", c.name+".golden")
			if *updateSimulateGolden {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestSimulateGolden -update-simulate)", err)
			}
			if out != string(want) {
				t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", golden, out, want)
			}
		})
	}
}

func TestSimulateJSON(t *testing.T) {
	out, code := runWanlab(t, "simulate", "--spec", "delay 20ms loss 2% | tbf rate 10mbit burst 20kb limit 100kb",
		"--packets", "50000", "--pps", "1000", "--size", "1000", "--json", "--seed", "3")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	// The field names are a contract.
	for _, k := range []string{"spec", "packets_in", "packets_out", "loss_percent", "delay_ms", "rate_bps",
		"drops", "duplicated", "corrupted", "reordered", "ecn_marked"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("missing field %q", k)
		}
	}
	var r struct {
		Spec        string  `json:"spec"`
		PacketsIn   uint64  `json:"packets_in"`
		PacketsOut  uint64  `json:"packets_out"`
		LossPercent float64 `json:"loss_percent"`
		Delay       struct {
			Mean, Stddev, P50, P99 float64
		} `json:"delay_ms"`
		RateBps float64 `json:"rate_bps"`
		Drops   struct {
			Loss, Queue uint64
		} `json:"drops"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Spec != "delay 20ms loss 2% | tbf rate 10mbit burst 20kb limit 100kb" {
		t.Errorf("spec %q", r.Spec)
	}
	// 8 Mbit/s offered under a 10 Mbit/s tbf: only the 2% loss drops.
	if r.PacketsIn != 50000 || r.PacketsOut+r.Drops.Loss != 50000 || r.Drops.Queue != 0 {
		t.Errorf("packets in %d out %d drops %+v", r.PacketsIn, r.PacketsOut, r.Drops)
	}
	if r.LossPercent < 1.7 || r.LossPercent > 2.3 {
		t.Errorf("loss_percent %.3f, want about 2", r.LossPercent)
	}
	if r.Delay.P50 < 20 || r.Delay.P50 > 21 || r.Delay.P99 < r.Delay.P50 {
		t.Errorf("delay %+v, want p50 just above 20 ms", r.Delay)
	}
	if r.RateBps < 7.7e6 || r.RateBps > 8.1e6 {
		t.Errorf("rate_bps %.0f, want the offered 8 Mbit/s minus loss", r.RateBps)
	}
}

func TestSimulateBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--spec", "dela 100ms"}, `unknown keyword "dela" at position 1`},
		{[]string{"--spec", "loss 120%"}, "120%"},
		{[]string{}, "--spec is required"},
		{[]string{"--spec", "delay 1ms", "--size", "10"}, "--size 10"},
		{[]string{"--spec", "delay 1ms", "--pps", "0"}, "--pps 0"},
		{[]string{"delay 1ms"}, "unexpected argument"},
	} {
		out, code := runWanlab(t, append([]string{"simulate"}, c.args...)...)
		if code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("simulate %q: exit %d, output %q; want exit %d and %q", c.args, code, out, exitUsage, c.want)
		}
	}
}
