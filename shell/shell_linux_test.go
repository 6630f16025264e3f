package shell_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/shell/shelltest"
)

// Tolerances of the shaping the shell must show: TCP's goodput within 5 %
// of the bucket's rate over a five-second transfer whose first second
// (slow start) is left out, and ping's round trip within 3 ms of the two
// delays (the proxy's release timing is sub-millisecond; the rest is
// scheduling on a loaded machine).
const (
	rateTolerance = 0.05
	rttTolerance  = 3 * time.Millisecond
)

// TestShellShapesIperf3AndPing runs the example: iperf3 -R from
// inside a shell against a server in the test's internet, 20 Mbit/s and
// 100 ms round trips; afterwards the host is as before.
func TestShellShapesIperf3AndPing(t *testing.T) {
	iperf3 := testenv.RequireCommand(t, "iperf3")
	ping := testenv.RequireCommand(t, "ping")
	w := shelltest.New(t)
	before := w.State(t)
	w.Serve(t, 5201, iperf3, "-s")
	impair := []string{"shell", "--impair", "down=delay 50ms | tbf rate 20mbit burst 32kb limit 200kb", "--impair", "up=delay 50ms", "--"}

	out, code := w.Run(t, append(impair, ping, "-c", "10", "-i", "0.2", shelltest.InternetAddr)...)
	if code != 0 {
		t.Fatalf("ping through the shell: exit %d\n%s", code, out)
	}
	rtt := shelltest.PingRTT(t, out)
	t.Logf("ping through up=delay 50ms, down=delay 50ms: median RTT %v", rtt)
	if (rtt - 100*time.Millisecond).Abs() > rttTolerance {
		t.Errorf("ping RTT %v through up=delay 50ms, down=delay 50ms: want 100 ms ± %v", rtt, rttTolerance)
	}

	out, code = w.Run(t, append(impair, iperf3, "-c", shelltest.InternetAddr, "-R", "-t", "5", "-O", "1", "-J")...)
	if code != 0 {
		t.Fatalf("iperf3 through the shell: exit %d\n%s", code, out)
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("iperf3 -J: %v\n%s", err, out)
	}
	const want = 20e6
	got := res.End.SumReceived.BitsPerSecond
	t.Logf("iperf3 -R through tbf rate 20mbit: %.2f Mbit/s received", got/1e6)
	if math.Abs(got-want) > rateTolerance*want {
		t.Errorf("iperf3 -R received %.2f Mbit/s through tbf rate 20mbit: want within %.0f %% of 20", got/1e6, rateTolerance*100)
	}
	w.RequireState(t, before, "host not restored after the shells exited")
}

// TestShellsNest runs a shell inside a shell: the delays add up.
func TestShellsNest(t *testing.T) {
	ping := testenv.RequireCommand(t, "ping")
	w := shelltest.New(t)
	before := w.State(t)
	out, code := w.Run(t, "shell", "--impair", "delay 25ms", "--",
		w.Wanlab, "shell", "--impair", "delay 10ms", "--", ping, "-c", "10", "-i", "0.2", shelltest.InternetAddr)
	if code != 0 {
		t.Fatalf("nested shells: exit %d\n%s", code, out)
	}
	rtt := shelltest.PingRTT(t, out)
	t.Logf("ping through delay 25ms around delay 10ms: median RTT %v", rtt)
	if (rtt - 70*time.Millisecond).Abs() > rttTolerance {
		t.Errorf("ping RTT %v through delay 25ms around delay 10ms: want 70 ms ± %v", rtt, rttTolerance)
	}
	w.RequireState(t, before, "host not restored after nested shells")
}

// TestShellExitCode: the command's exit status is the shell's, 128+N for
// a command ended by signal N, and 2 for a command that does not exist.
func TestShellExitCode(t *testing.T) {
	w := shelltest.New(t)
	before := w.State(t)
	for _, c := range []struct {
		script string
		want   int
	}{{"exit 0", 0}, {"exit 7", 7}, {"kill -TERM $$", 128 + int(syscall.SIGTERM)}} {
		if _, code := w.Run(t, "shell", "--", "/bin/sh", "-c", c.script); code != c.want {
			t.Errorf("wanlab shell -- sh -c %q: exit %d, want %d", c.script, code, c.want)
		}
	}
	if _, code := w.Run(t, "shell", "--", "wanlab-no-such-command"); code != 2 {
		t.Errorf("wanlab shell -- wanlab-no-such-command: exit %d, want 2", code)
	}
	if _, code := w.Run(t, "shell", "--impair", "up=delay fast"); code != 2 {
		t.Errorf("wanlab shell --impair 'up=delay fast': exit %d, want 2", code)
	}
	w.RequireState(t, before, "host not restored")
}

// TestShellCleanupAfterSIGKILL kills a shell with SIGKILL while its
// command runs, and a shell nested in another with both; wanlab cleanup
// then leaves the host as before.
func TestShellCleanupAfterSIGKILL(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprintf("nested=%v", nested), func(t *testing.T) { killShell(t, nested) })
	}
}

func killShell(t *testing.T, nested bool) {
	w := shelltest.New(t)
	before := w.State(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	args := []string{"shell", "--impair", "delay 5ms", "--"}
	if nested {
		args = append(args, w.Wanlab, "shell", "--impair", "delay 5ms", "--")
	}
	cmd := w.Command(t, append(args, "/bin/sh", "-c", "echo $$ > "+pidFile+"; exec sleep 600")...)
	// A file, not a pipe: the command outlives the shell, and Wait would
	// wait for it to close a pipe it inherited.
	errf, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stderr = errf
	w.Host.Do(t, cmd.Start)
	t.Cleanup(func() { cmd.Process.Kill() })
	var child int
	testenv.WaitFor(t, "the shell's command to start", func() bool {
		b, err := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if nested {
		// The inner shell is the command's parent.
		f, err := hostfile.ProcStat(strconv.Itoa(child))
		if err != nil {
			t.Fatal(err)
		}
		inner, _ := strconv.Atoi(f[1])
		if err := syscall.Kill(inner, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the inner shell %d: %v", inner, err)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	said, err := os.ReadFile(errf.Name())
	if err != nil {
		t.Fatal(err)
	}
	w.Stderr.Write(said)
	if ids := shelltest.ShellID.FindAll(said, -1); len(ids) != map[bool]int{false: 1, true: 2}[nested] {
		t.Fatalf("shell ids in their standard error %q: want one per shell", said)
	}
	if w.State(t) == before {
		t.Fatal("the shell changed nothing in the host namespace before it was killed")
	}
	// Cleanup runs where a user runs it, in the machine's namespace; it
	// finds the host namespace by its name in the journal.
	out, err := exec.Command(w.Wanlab, "cleanup").CombinedOutput()
	t.Logf("wanlab cleanup:\n%s", out)
	if err != nil {
		t.Fatalf("wanlab cleanup: %v", err)
	}
	w.RequireState(t, before, "host not restored by wanlab cleanup after SIGKILL")
	// The command the killed shell ran ended with its namespace, not left
	// running in a detached one (a zombie waiting for its new parent
	// counts as ended).
	testenv.WaitFor(t, "the killed shell's command to end with its namespace", func() bool {
		f, err := hostfile.ProcStat(strconv.Itoa(child))
		return err != nil || f[0] == "Z"
	})
}

// TestProxySetInsideShell: the command changes its own link with `wanlab
// proxy set`, which finds it through WANLAB_CONTROL, and `proxy stats`
// names the directions up and down.
func TestProxySetInsideShell(t *testing.T) {
	ping := testenv.RequireCommand(t, "ping")
	w := shelltest.New(t)
	before := w.State(t)
	script := w.Wanlab + ` proxy set 'up=delay 40ms' && ` + w.Wanlab + ` proxy stats | grep -c 'leaving through \(up\|down\)' && ` +
		ping + ` -c 5 -i 0.2 ` + shelltest.InternetAddr
	out, code := w.Run(t, "shell", "--impair", "delay 5ms", "--", "/bin/sh", "-c", script)
	if code != 0 {
		t.Fatalf("proxy set inside the shell: exit %d\n%s", code, out)
	}
	if !strings.HasPrefix(out, "up=delay 40ms\n2\n") {
		t.Errorf("proxy set and stats inside the shell printed %q, want up=delay 40ms and two directions", out)
	}
	rtt := shelltest.PingRTT(t, out)
	t.Logf("ping after proxy set up=delay 40ms (down delay 5ms): median RTT %v", rtt)
	if (rtt - 45*time.Millisecond).Abs() > rttTolerance {
		t.Errorf("ping RTT %v after proxy set 'up=delay 40ms' with down=delay 5ms: want 45 ms ± %v", rtt, rttTolerance)
	}
	w.RequireState(t, before, "host not restored")
}

// TestShellScheduleAndPcap: --schedule steps a direction's spec while the
// command runs, and --pcap records what passed the engine.
func TestShellScheduleAndPcap(t *testing.T) {
	ping := testenv.RequireCommand(t, "ping")
	w := shelltest.New(t)
	before := w.State(t)
	dir := t.TempDir()
	sched, pcap := filepath.Join(dir, "up.sched"), filepath.Join(dir, "shell.pcapng")
	if err := os.WriteFile(sched, []byte("0s delay 5ms\n1s delay 45ms\nend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// 15 pings 200 ms apart: the first three within the schedule's first
	// second, the last five a second and more after its step.
	out, code := w.Run(t, "shell", "--impair", "down=delay 5ms", "--schedule", "up="+sched, "--pcap", pcap, "--",
		ping, "-c", "15", "-i", "0.2", shelltest.InternetAddr)
	if code != 0 {
		t.Fatalf("ping in a shell with a schedule: exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var replies []string
	for _, l := range lines {
		if strings.Contains(l, "icmp_seq=") {
			replies = append(replies, l)
		}
	}
	if len(replies) != 15 {
		t.Fatalf("%d replies of 15:\n%s", len(replies), out)
	}
	for _, c := range []struct {
		what    string
		replies []string
		want    time.Duration
	}{{"first three", replies[:3], 10 * time.Millisecond}, {"last five", replies[10:], 50 * time.Millisecond}} {
		if rtt := shelltest.PingRTT(t, strings.Join(c.replies, "\n")); (rtt - c.want).Abs() > rttTolerance {
			t.Errorf("%s replies: median RTT %v, want %v ± %v\n%s", c.what, rtt, c.want, rttTolerance, out)
		}
	}
	// 30 echo packets, each 100 bytes and more with its block.
	if st, err := os.Stat(pcap); err != nil {
		t.Errorf("--pcap: %v", err)
	} else if st.Size() < 30*100 {
		t.Errorf("--pcap %s: %d bytes; want the pings in it", pcap, st.Size())
	}
	w.RequireState(t, before, "host not restored")
}
