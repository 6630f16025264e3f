package testenv

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// Tcpdump starts tcpdump inside ns writing what dev ("any" for all)
// receives and sends to the pcap file path, with args appended (snaplen,
// filter), and returns once tcpdump says it is listening. Immediate mode
// and -U put packets into the file as they come, not when a kernel ring
// block fills, so the file can be read while the capture runs and SIGINT
// loses nothing. stop ends the capture (SIGINT, then wait); it runs at the
// end of the test anyway and may be called more than once.
func Tcpdump(t testing.TB, ns netns.NsHandle, dev, path string, args ...string) (stop func()) {
	t.Helper()
	RequireCommand(t, "tcpdump")
	cmd := exec.Command("tcpdump", append([]string{"-i", dev, "--immediate-mode", "-U", "-n", "-w", path}, args...)...)
	// Through an io.Pipe, not StderrPipe: Wait then waits for the copy
	// into it instead of closing a pipe the reader below still reads.
	stderr, stderrW := io.Pipe()
	cmd.Stderr = stderrW
	// Started from a thread inside ns, tcpdump is born in ns (and is our
	// own child, so the stop signal reaches it directly).
	if err := nsrun.Do(ns, cmd.Start); err != nil {
		stderrW.Close()
		t.Fatalf("tcpdump on %s: %v", dev, err)
	}
	var said []string
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			said = append(said, sc.Text())
			if strings.Contains(sc.Text(), "listening on") {
				listening <- true
				break
			}
		}
		close(listening)
		_, _ = io.Copy(io.Discard, stderr)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
			stderrW.Close()
		}
	}
	t.Cleanup(stop)
	select {
	case ok := <-listening:
		if !ok {
			stop()
			t.Fatalf("tcpdump on %s exited before listening: %s", dev, strings.Join(said, "; "))
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("tcpdump on %s did not start listening within 10 s", dev)
	}
	return stop
}
