// Package shelltest builds the world the shell's tests run in: a namespace
// standing for the user's host, where wanlab shell runs, and one standing
// for the internet behind it. It sits beside shell, as labtest beside lab,
// for the shell's, the client's and the lab command's tests.
package shelltest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/shell"
)

// The tests' world: a namespace standing for the host a user runs
// `wanlab shell` on ("host"), and one standing for the internet behind
// it, joined by a veth. Every shell runs inside "host", so its NAT,
// forwarding and veths land there, and all traffic stays between the two.

// Addresses of the host and the internet on their veth.
const (
	HostAddr     = "10.250.0.1"
	InternetAddr = "10.250.0.2"
)

// World is the host and internet namespaces, joined by a veth, and the
// wanlab binary the tests run.
type World struct {
	Host, Internet *testenv.Node
	Wanlab         string
	// Stderr gathers what the shells said; their ids are in it.
	Stderr bytes.Buffer
}

// New builds a World, removed when the test ends.
func New(t testing.TB) *World {
	t.Helper()
	w := &World{Host: testenv.NewNode(t), Internet: testenv.NewNode(t), Wanlab: testenv.StaticWanlab(t)}
	w.Host.Veth(t, "wlt-h", "wlt-i", w.Internet)
	w.Host.Addr(t, "wlt-h", HostAddr+"/24")
	w.Internet.Addr(t, "wlt-i", InternetAddr+"/24")
	w.Host.WaitSettled(t, "wlt-h")
	w.Internet.WaitSettled(t, "wlt-i")
	return w
}

// State is what must be as before once a shell is gone: the host's links,
// addresses, routes, rules and forwarding sysctls, its nftables tables,
// and the namespaces and state of every shell the test started (other
// labs on the machine come and go).
func (w *World) State(t testing.TB) string {
	t.Helper()
	var tables []string
	w.Host.Do(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		ts, err := c.ListTables()
		if err != nil {
			return err
		}
		for _, tb := range ts {
			tables = append(tables, fmt.Sprintf("nft table %d %s", tb.Family, tb.Name))
		}
		return nil
	})
	for _, m := range ShellID.FindAllStringSubmatch(w.Stderr.String(), -1) {
		for _, role := range []string{"client", "router", "server"} {
			if ns := "wanlab-" + m[1] + "-" + role; nsrun.Exists(ns) {
				tables = append(tables, "netns "+ns)
			}
		}
		for _, p := range []string{filepath.Join(shell.StateDir, m[1]), filepath.Join(lab.DefaultStateDir, m[1]+".json")} {
			if _, err := os.Lstat(p); err == nil {
				tables = append(tables, "state "+p)
			}
		}
	}
	sort.Strings(tables)
	return w.Host.Snapshot(t) + strings.Join(tables, "\n")
}

// RequireState fails the test unless the host is as the snapshot was,
// waiting up to settleWithin: a deleted namespace's links go with it in
// the kernel's asynchronous namespace cleanup (cleanup_net), after the
// deleting process has returned.
func (w *World) RequireState(t testing.TB, want, what string) {
	t.Helper()
	const settleWithin = 10 * time.Second
	deadline := time.Now().Add(settleWithin)
	for w.State(t) != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling interval: no event says a namespace is gone
	}
	if got := w.State(t); got != want {
		t.Fatalf("%s:\n%s", what, testenv.DiffLines(want, got))
	}
}

// Command is `wanlab ARGS...` started inside the host namespace.
func (w *World) Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(w.Wanlab, args...)
	cmd.Stderr = &w.Stderr
	return cmd
}

// Run runs `wanlab ARGS...` in the host namespace and returns its standard
// output and exit status.
func (w *World) Run(t testing.TB, args ...string) (string, int) {
	t.Helper()
	cmd := w.Command(t, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	n := w.Stderr.Len()
	w.Host.Do(t, cmd.Start)
	err := cmd.Wait()
	t.Logf("wanlab %s\nstderr: %s", strings.Join(args, " "), w.Stderr.String()[n:])
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// Serve starts a server command in the internet namespace, stopped (by
// its PID) when the test ends, and waits until it listens on port.
func (w *World) Serve(t testing.TB, port int, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	w.Internet.Do(t, cmd.Start)
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	// Listening sockets in state LISTEN (0A) on the port, any address;
	// /proc/thread-self/net is the namespace of the thread that reads it
	// (/proc/net is the process's).
	listen4, listen6 := fmt.Sprintf(":%04X 00000000:0000 0A", port), fmt.Sprintf(":%04X 00000000000000000000000000000000:0000 0A", port)
	listening := func() bool {
		found := false
		w.Internet.Do(t, func() error {
			b4, _ := os.ReadFile("/proc/thread-self/net/tcp")
			b6, _ := os.ReadFile("/proc/thread-self/net/tcp6")
			found = bytes.Contains(b4, []byte(listen4)) || bytes.Contains(b6, []byte(listen6))
			return nil
		})
		return found
	}
	testenv.WaitFor(t, fmt.Sprintf("%s listening on port %d", name, port), func() bool {
		select {
		case <-exited:
			return true
		default:
			return listening()
		}
	})
	select {
	case <-exited:
		t.Fatalf("%s exited before it listened on port %d: %s", name, port, out.String())
	default:
	}
}

// ShellID finds a shell's id in what it prints on standard error.
var ShellID = regexp.MustCompile(`wanlab shell ([0-9a-z]+):`)

var pingTime = regexp.MustCompile(`icmp_seq=\d+ .*time=([0-9.]+) ms`)

// PingRTT is the median round trip of ping's replies: what the link
// holds every packet for, unmoved by the odd reply a loaded machine
// delays.
func PingRTT(t testing.TB, out string) time.Duration {
	t.Helper()
	var rtts []time.Duration
	for _, m := range pingTime.FindAllStringSubmatch(out, -1) {
		ms, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		rtts = append(rtts, time.Duration(ms*float64(time.Millisecond)))
	}
	if len(rtts) == 0 {
		t.Fatalf("no ping replies in %q", out)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}
