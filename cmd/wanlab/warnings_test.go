package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSimulateWarnsOfADelaysLimit: simulate's flood through `delay 20ms`
// drops half its packets at netem's 1000-packet limit, and says so once
// with the limit that holds it; with that limit nothing is dropped.
func TestSimulateWarnsOfADelaysLimit(t *testing.T) {
	for _, c := range []struct {
		spec, warning string
		dropped       uint64
	}{
		{"delay 20ms", "delay 20ms: its limit of 1000 packets holds 20ms of 50000 packets/s; at 100000 packets/s", 10000},
		{"delay 20ms limit 2000", "", 0},
	} {
		out, stderr, code := runSplit(t, "simulate", "--spec", c.spec, "--packets", "20000", "--pps", "100000", "--json")
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", c.spec, code, stderr)
		}
		var res struct {
			Warnings []string `json:"warnings"`
			Drops    struct {
				Queue uint64 `json:"queue"`
			} `json:"drops"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		// The first 1000 fill the line; from then on every other packet
		// finds it full.
		if d := res.Drops.Queue; d < c.dropped*9/10 || d > c.dropped*11/10 {
			t.Errorf("%s: %d queue drops, want about %d", c.spec, d, c.dropped)
		}
		switch {
		case c.warning == "" && len(res.Warnings) != 0:
			t.Errorf("%s: warnings %q, want none", c.spec, res.Warnings)
		case c.warning != "" && (len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], c.warning) ||
			!strings.HasSuffix(res.Warnings[0], "write 'limit 2000' or more")):
			t.Errorf("%s: warnings %q, want one with %q", c.spec, res.Warnings, c.warning)
		}
	}
}

// TestTBFWithoutBurstSuggestsOne: the usage error names the smallest
// burst that works, and that burst runs.
func TestTBFWithoutBurstSuggestsOne(t *testing.T) {
	stdout, stderr, code := runSplit(t, "simulate", "--spec", "tbf rate 10mbit limit 100kb", "--packets", "100")
	if code != exitUsage || stdout != "" || !strings.Contains(strings.Split(stderr, "\n")[0], "the smallest that works is 1514b") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	if _, stderr, code := runSplit(t, "simulate", "--spec", "tbf rate 10mbit burst 1514b limit 100kb", "--packets", "100"); code != exitOK {
		t.Fatalf("the suggested burst: exit %d: %s", code, stderr)
	}
}
