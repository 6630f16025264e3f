package kept_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wanlab/wanlab/client"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/kept"
	"github.com/wanlab/wanlab/lab/labtest"
)

// TestLabUpExecSetDown is the lab session: lab up, iperf3 -s in
// the server, iperf3 -c -R in the client, the bucket's rate cut through
// the control API while it runs, lab down; nothing is left.
func TestLabUpExecSetDown(t *testing.T) {
	iperf3 := testenv.RequireCommand(t, "iperf3")
	testenv.RequireRoot(t)
	wanlab := testenv.StaticWanlab(t)
	name := testenv.UniqueName("t")
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(wanlab, args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("wanlab %v: %v\n%s%s", args, err, out, errb.String())
		}
		return out
	}
	run("lab", "up", "--name", name, "--impair", "to-client=delay 20ms | tbf rate 20mbit burst 32kb limit 200kb", "--impair", "to-server=delay 20ms")
	t.Cleanup(func() {
		if i, err := kept.Find(name); err == nil && i.Alive() {
			exec.Command(wanlab, "lab", "down", "--name", name).Run()
		}
	})
	info, err := kept.Find(name)
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "iperf3.pid")
	run("lab", "exec", "--name", name, "server", "--", iperf3, "-s", "-D", "-1", "-I", pidFile)
	var server int
	testenv.WaitFor(t, "iperf3 -s to write its pid", func() bool {
		b, err := os.ReadFile(pidFile)
		server, _ = strconv.Atoi(strings.TrimSpace(strings.TrimRight(string(b), "\x00")))
		return err == nil && server > 0
	})
	// -1 ends it after one test; a test that fails first stops it here.
	t.Cleanup(func() { syscall.Kill(server, syscall.SIGKILL) })

	// A capture of the server's link runs through the first two seconds.
	pcap := filepath.Join(t.TempDir(), "server.pcapng")
	capCmd := exec.Command(wanlab, "lab", "capture", "--name", name, "--host", "server", "--duration", "2s", pcap)
	var capOut bytes.Buffer
	capCmd.Stdout, capCmd.Stderr = &capOut, &capOut
	if err := capCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capCmd.Process.Kill() })

	// The client's iperf3 runs while the test changes the link.
	cmd := exec.Command(wanlab, "lab", "exec", "--name", name, "client", "--", iperf3, "-c", info.Addrs["server"].String(), "-R", "-t", "6", "-J")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	link, err := client.Dial(info.Control)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "2 MB through the link", func() bool {
		st, err := link.Stats()
		return err == nil && len(st.Directions) == 2 && st.Directions[0].Engine.Totals.BytesOut > 2e6
	})
	if err := link.Set("to-client", "delay 20ms | tbf rate 5mbit burst 32kb limit 200kb"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("iperf3 -c: %v\n%s", err, out.String())
	}
	var res struct {
		Intervals []struct {
			Sum struct {
				Seconds       float64 `json:"seconds"`
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum"`
		} `json:"intervals"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Intervals) < 6 {
		t.Fatalf("iperf3 -J: %v, %d intervals\n%s", err, len(res.Intervals), out.String())
	}
	// The rate before the change in the first second, after it over the
	// last three whole seconds: within 5 % of the bucket's there, its
	// queue long settled; the first only below the old rate (slow
	// start). A busy bottleneck delivers its rate in any window, but one
	// second of iperf3's receiver is off by the reads a loaded CPU
	// delays across its boundary (5.61 Mbit/s in one loaded soak run);
	// three seconds dilute that. (Whole seconds: iperf3 may end with a
	// sliver of one.)
	first := res.Intervals[0].Sum.BitsPerSecond
	var bits, secs float64
	for i, k := len(res.Intervals)-1, 0; i >= 1 && k < 3; i-- {
		if iv := res.Intervals[i].Sum; iv.Seconds >= 0.9 {
			bits, secs, k = bits+iv.BitsPerSecond*iv.Seconds, secs+iv.Seconds, k+1
		}
	}
	last := 0.0
	if secs > 0 {
		last = bits / secs
	}
	t.Logf("iperf3 -R: first second %.2f Mbit/s (tbf 20mbit), last three seconds %.2f Mbit/s (tbf 5mbit, set mid-run)", first/1e6, last/1e6)
	if first < 10e6 || first > 21e6 {
		t.Errorf("first second %.2f Mbit/s under tbf rate 20mbit: want 10 to 21", first/1e6)
	}
	if last < 4.75e6 || last > 5.25e6 {
		t.Errorf("last three seconds %.2f Mbit/s after proxy set to tbf rate 5mbit: want 5 ± 5 %%", last/1e6)
	}

	if err := capCmd.Wait(); err != nil {
		t.Fatalf("lab capture: %v\n%s", err, capOut.String())
	}
	var packets int
	if _, err := fmt.Sscanf(strings.TrimPrefix(capOut.String(), "lab capture: wl"+name+"-s of "+info.Namespaces["server"]+": "), "%d packets", &packets); err != nil || packets < 100 {
		t.Errorf("lab capture of the server's link during iperf3: %q, want 100 packets or more", capOut.String())
	}
	if st, err := os.Stat(pcap); err != nil || st.Size() == 0 {
		t.Errorf("capture file %s: %v", pcap, err)
	}

	run("lab", "down", "--name", name)
	labtest.AssertLabGone(t, name)
	if _, err := os.Stat(filepath.Join(kept.StateDir, name)); !os.IsNotExist(err) {
		t.Errorf("state of lab %s: %v, want it removed", name, err)
	}
}

// TestLabCleanupAfterSIGKILL: a kept lab whose process dies by SIGKILL is
// removed by wanlab cleanup, state and all.
func TestLabCleanupAfterSIGKILL(t *testing.T) {
	testenv.RequireRoot(t)
	wanlab := testenv.StaticWanlab(t)
	name := testenv.UniqueName("k")
	if out, err := exec.Command(wanlab, "lab", "up", "--name", name).CombinedOutput(); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	info, err := kept.Find(name)
	if err != nil {
		t.Fatal(err)
	}
	// The lab's process is this test's to stop: it started it.
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the lab's process to die", func() bool { return !info.Alive() })
	out, err := exec.Command(wanlab, "cleanup").CombinedOutput()
	t.Logf("wanlab cleanup:\n%s", out)
	if err != nil {
		t.Fatalf("wanlab cleanup: %v", err)
	}
	labtest.AssertLabGone(t, name)
	if _, err := os.Stat(filepath.Join(kept.StateDir, name)); !os.IsNotExist(err) {
		t.Errorf("state of lab %s: %v, want it removed", name, err)
	}
}
