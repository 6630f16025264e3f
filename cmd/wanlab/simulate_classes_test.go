package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const simTree = "htb default 2; class 1:1 htb rate 100mbit; " +
	"class 1:2 parent 1:1 htb rate 20mbit ceil 100mbit; class 1:3 parent 1:1 htb rate 50mbit ceil 100mbit; " +
	"class 1:4 parent 1:1 htb rate 20mbit ceil 100mbit; " +
	"filter dst 10.0.2.0/24 flowid 1:2; filter dst 10.0.3.0/24 flowid 1:3; filter dst 10.0.4.0/24 flowid 1:4"

func TestSimulateClassesJSON(t *testing.T) {
	out, code := runWanlab(t, "simulate", "--classes", simTree, "--flow", "dst=10.0.2.1,rate=90mbit",
		"--flow", "dst=10.0.3.1,rate=90mbit", "--duration", "3s", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var res struct {
		Result []struct {
			ID            string  `json:"id"`
			RealizedBps   float64 `json:"realized_bps"`
			BorrowedBytes uint64  `json:"borrowed_bytes"`
			Drops         struct {
				Queue uint64 `json:"queue"`
			} `json:"drops"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err, out)
	}
	got := map[string]float64{}
	for _, c := range res.Result {
		got[c.ID] = c.RealizedBps
		if (c.ID == "1:2" || c.ID == "1:3") && (c.BorrowedBytes == 0 || c.Drops.Queue == 0) {
			t.Errorf("class %s: borrowed %d bytes, %d queue drops: want both > 0", c.ID, c.BorrowedBytes, c.Drops.Queue)
		}
	}
	// 1:4 idle: its 20 Mbit/s go to 1:2 and 1:3 (even quanta: 35 and 65).
	for id, want := range map[string]float64{"1:1": 100e6, "1:2": 35e6, "1:3": 65e6} {
		if g := got[id]; g < want*0.97 || g > want*1.03 {
			t.Errorf("class %s: %.2f Mbit/s, want %.0f", id, g/1e6, want/1e6)
		}
	}
}

func TestSimulateClassesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--classes", simTree}, "needs at least one --flow"},
		{[]string{"--classes", simTree, "--flow", "dst=10.0.2.1,rat=1mbit"}, `unknown key "rat"`},
		{[]string{"--classes", "class 1:1 htb rate 1mbit ceil 1kbit", "--flow", "dst=10.0.2.1,rate=1mbit"}, "class 1:1: ceil 1kbit is below rate 1mbit"},
		{[]string{"--classes", simTree, "--spec", "delay 1ms", "--flow", "dst=10.0.2.1,rate=1mbit"}, "exclude each other"},
	} {
		out, code := runWanlab(t, append([]string{"simulate"}, c.args...)...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, out, c.want)
		}
	}
}

var updateClassesGolden = flag.Bool("update-classes", false, "rewrite testdata/simulate/classes.golden")

// The text table of a class simulation: seed 004's tree, 1:4 idle, a
// netem leaf on 1:3.
func TestSimulateClassesGolden(t *testing.T) {
	out, code := runWanlab(t, "simulate", "--classes", simTree+"; leaf 1:3 delay 10ms", "--flow", "dst=10.0.2.1,rate=90mbit",
		"--flow", "dst=10.0.3.1,rate=40mbit", "--flow", "dst=10.0.9.9,rate=5mbit", "--duration", "2s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	golden := filepath.Join("testdata", "simulate", "classes.golden")
	if *updateClassesGolden {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSimulateClassesGolden -update-classes)", err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", golden, out, want)
	}
}

// TestSimulateSpecTakesClasses: --spec takes a class set as --classes
// does (one impairment value), with the same output, and refuses a
// schedule for it.
func TestSimulateSpecTakesClasses(t *testing.T) {
	args := []string{"--flow", "dst=10.0.2.1,rate=90mbit", "--duration", "1s"}
	a, ca := runWanlab(t, append([]string{"simulate", "--classes", simTree}, args...)...)
	b, cb := runWanlab(t, append([]string{"simulate", "--spec", simTree}, args...)...)
	if ca != 0 || cb != 0 || a != b {
		t.Fatalf("--classes (exit %d):\n%s\n--spec (exit %d):\n%s", ca, a, cb, b)
	}
	sched := filepath.Join(t.TempDir(), "x.sched")
	if err := os.WriteFile(sched, []byte("0s delay 1ms\nend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runWanlab(t, "simulate", "--spec", simTree, "--schedule", sched); code != 2 || !strings.Contains(out, "steps a pipeline, not a class set") {
		t.Errorf("--schedule with a class set: exit %d: %s", code, out)
	}
}
