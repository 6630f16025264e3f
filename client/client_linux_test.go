package client_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wanlab/wanlab/client"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/shell/shelltest"
)

var pingTime = regexp.MustCompile(`icmp_seq=(\d+) .*time=([0-9.]+) ms`)

// TestShellDegradedMidTest is the package's example as a test: a shell
// around ping, the link made worse through the client while ping runs,
// and ping's round trips following it; Reset puts the spec back; the
// shell ends on SIGTERM and leaves the host as before.
func TestShellDegradedMidTest(t *testing.T) {
	ping := testenv.RequireCommand(t, "ping")
	w := shelltest.New(t)
	before := w.State(t)
	dir := t.TempDir()
	ctlFile, pingOut, done := filepath.Join(dir, "control"), filepath.Join(dir, "ping"), filepath.Join(dir, "done")
	// The command tells the test its control address, pings 40 times, 100
	// ms apart, and waits to be stopped.
	script := `echo "$WANLAB_CONTROL" > ` + ctlFile + `; ` + ping + ` -i 0.1 -c 40 ` + shelltest.InternetAddr +
		` > ` + pingOut + `; touch ` + done + `; exec sleep 600`
	cmd := w.Command(t, "shell", "--impair", "delay 5ms", "--", "/bin/sh", "-c", script)
	w.Host.Do(t, cmd.Start)
	t.Cleanup(func() { cmd.Process.Kill() })
	var addr string
	testenv.WaitFor(t, "the command to write its control address", func() bool {
		b, err := os.ReadFile(ctlFile)
		addr = strings.TrimSpace(string(b))
		return err == nil && addr != ""
	})

	link, err := client.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	initial, err := link.Specs()
	if err != nil {
		t.Fatal(err)
	}
	if initial["up"] != "delay 5ms" || initial["down"] != "delay 5ms" {
		t.Fatalf("specs %v, want delay 5ms up and down", initial)
	}
	// Ten round trips at 10 ms first.
	testenv.WaitFor(t, "ten pings through the link", func() bool {
		st, err := link.Stats()
		return err == nil && len(st.Directions) == 2 && st.Directions[1].Engine.Totals.PacketsOut >= 10
	})
	if err := link.Set("down", "delay 95ms"); err != nil {
		t.Fatal(err)
	}
	if err := link.Set("up", "delay fast"); !client.BadSpec(err) {
		t.Errorf("Set(up, delay fast): %v, want a refused spec", err)
	}
	testenv.WaitFor(t, "ping to finish", func() bool { _, err := os.Stat(done); return err == nil })
	if err := link.Reset(); err != nil {
		t.Fatal(err)
	}
	if specs, err := link.Specs(); err != nil || specs["down"] != "delay 5ms" || specs["up"] != "delay 5ms" {
		t.Errorf("after Reset: specs %v (%v), want delay 5ms both ways", specs, err)
	}

	out, err := os.ReadFile(pingOut)
	if err != nil {
		t.Fatal(err)
	}
	var rtts []time.Duration
	for _, m := range pingTime.FindAllStringSubmatch(string(out), -1) {
		ms, _ := strconv.ParseFloat(m[2], 64)
		rtts = append(rtts, time.Duration(ms*float64(time.Millisecond)))
	}
	if len(rtts) < 30 {
		t.Fatalf("%d ping replies of 40:\n%s", len(rtts), out)
	}
	const tolerance = 3 * time.Millisecond
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	// The first five went before the Set (made after ten pings), the last
	// ten long after it; medians, unmoved by the odd reply a loaded
	// machine delays.
	if first := median(rtts[:5]); (first - 10*time.Millisecond).Abs() > tolerance {
		t.Errorf("median round trip %v of the first five under delay 5ms both ways: want 10 ms ± %v", first, tolerance)
	}
	if last := median(rtts[len(rtts)-10:]); (last - 100*time.Millisecond).Abs() > tolerance {
		t.Errorf("median round trip %v of the last ten after Set(down, delay 95ms): want 100 ms ± %v\n%s", last, tolerance, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("shell after SIGTERM: %v, want exit %d (its command's, ended by SIGTERM)", err, 128+int(syscall.SIGTERM))
	}
	if _, err := link.Specs(); err == nil {
		t.Error("the link still answers after its shell ended")
	}
	w.RequireState(t, before, "host not restored after the shell ended on SIGTERM")
}
