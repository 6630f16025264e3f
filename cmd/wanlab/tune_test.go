package main

import (
	"context"
	"strings"
	"testing"
)

func TestTuneShowWindowRatio(t *testing.T) {
	for _, arg := range []string{"0.66", "66%"} {
		out, err, code := runApp(context.Background(), "tune", "show", "--rtt", "35ms", "--window-ratio", arg)
		if err != nil || code != 0 {
			t.Fatalf("--window-ratio %s: exit %d: %v", arg, code, err)
		}
		if !strings.Contains(out, "window = 66% of the buffer") {
			t.Errorf("--window-ratio %s: the model line does not use it:\n%s", arg, out)
		}
	}
	out, err, code := runApp(context.Background(), "tune", "plan", "--rtt", "35ms", "--rate", "100MBps", "--window-ratio", "0.5", "--json")
	if err != nil || code != 0 || !strings.Contains(out, `"window_ratio": 0.5`) {
		t.Errorf("plan --window-ratio 0.5 --json: exit %d, %v:\n%s", code, err, out)
	}
}

func TestTuneBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"tune", "show", "--window-ratio", "0"}, `--window-ratio "0"`},
		{[]string{"tune", "show", "--window-ratio", "1.5"}, `--window-ratio "1.5"`},
		{[]string{"tune", "show", "--window-ratio", "most"}, `--window-ratio "most"`},
		{[]string{"tune", "show", "--rtt", "-5ms"}, "--rtt"},
		{[]string{"tune", "plan", "--rtt", "35ms"}, "give --rtt and --rate"},
		{[]string{"tune", "plan", "--rtt", "35ms", "--rate", "fast"}, "--rate"},
	} {
		_, err, code := runApp(context.Background(), c.args...)
		if code != exitUsage || err == nil || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: exit %d, err %v; want exit 2 and one line with %q", c.args, code, err, c.msg)
		}
	}
}
