package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/control"
)

func TestParseImpair(t *testing.T) {
	ifaces := [2]string{"ens3", "ens4"}
	for _, c := range []struct {
		in   []string
		want [2]string
		err  string
	}{
		{nil, [2]string{}, ""},
		{[]string{"delay 10ms"}, [2]string{"delay 10ms", "delay 10ms"}, ""},
		{[]string{"ens4=delay 50ms loss 1% | tbf rate 100mbit burst 64kb limit 1mb"},
			[2]string{"", "delay 50ms loss 1% | tbf rate 100mbit burst 64kb limit 1mb"}, ""},
		{[]string{"delay 10ms", "ens3=loss 1%"}, [2]string{"loss 1%", "delay 10ms"}, ""},
		{[]string{"eth9=delay 1ms"}, [2]string{}, `"eth9" is not one of the interfaces (ens3, ens4)`},
	} {
		got, err := parseImpair(ifaces, c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// runApp runs the wanlab app with args and returns its output, error and
// exit code.
func runApp(ctx context.Context, args ...string) (string, error, int) {
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := runCommandLine(ctx, app, append([]string{"wanlab"}, args...))
	code := 0
	if err != nil {
		code = exitCode(err)
	}
	return out.String(), err, code
}

func TestProxyBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"proxy", "--iface", "a"}, "need --iface twice"},
		{[]string{"proxy", "--iface", "a", "--iface", "a"}, "need --iface twice"},
		{[]string{"proxy", "--iface", "a", "--iface", "b", "--impair", "dela 1ms"}, `unknown keyword "dela"`},
		{[]string{"proxy", "--iface", "a", "--iface", "b", "--impair", "c=delay 1ms"}, `"c" is not one of the interfaces`},
		{[]string{"proxy", "--iface", "a", "--iface", "b", "--backend", "tap"}, `--backend "tap"`},
		{[]string{"proxy", "--iface", "a", "--iface", "b", "--low-latency", "fast"}, `low-latency mode "fast"`},
		{[]string{"proxy", "--iface", "a", "--iface", "b", "delay 1ms"}, "unexpected argument"},
	} {
		_, err, code := runApp(context.Background(), c.args...)
		if code != exitUsage || err == nil || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: exit %d, err %v; want exit 2 and one line with %q", c.args, code, err, c.msg)
		}
	}
}

func TestProxyMissingInterface(t *testing.T) {
	ns, _ := testenv.NetNS(t)
	_, err, code := runApp(context.Background(), "proxy", "--iface", "lo", "--iface", "eth9",
		"--netns", ns, "--state-dir", t.TempDir())
	if code != exitUsage || err == nil || !strings.Contains(err.Error(), `interface "eth9": not found`) {
		t.Fatalf("exit %d, err %v; want exit 2 naming eth9", code, err)
	}
}

// TestProxyCommand runs `wanlab proxy` in a namespace with two veth pairs,
// changes its spec through the control socket, stops it like SIGINT would
// and checks nothing is left behind.
func TestProxyCommand(t *testing.T) {
	ns, h := twoVeths(t)
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	dir := t.TempDir()
	sock := "unix:" + filepath.Join(dir, "ctl.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out  string
		err  error
		code int
	}
	done := make(chan result, 1)
	go func() {
		out, err, code := runApp(ctx, "proxy", "--iface", "pa", "--iface", "pb", "--impair", "pb=delay 10ms", "--impair", "pa=loss 10% 50%",
			"--netns", ns, "--state-dir", dir, "--control", sock, "--seed", "3", "--backend", "water",
			"--pcap", filepath.Join(dir, "tap.pcapng"), "--metrics", "127.0.0.1:0")
		done <- result{out, err, code}
	}()
	c := control.Dial(sock)
	deadline := time.Now().Add(20 * time.Second)
	var specs map[string]string
	for {
		if specs, err = c.Specs(); err == nil {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("proxy exited: %v\n%s", r.err, r.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("control socket never answered: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if specs["pb"] != "delay 10ms" || specs["pa"] != "loss 10% 50%" {
		t.Fatalf("specs %v", specs)
	}
	if err := c.Set("pa", "delay 5ms loss 1%"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("pa", "dela 5ms"); err == nil || !control.BadSpec(err) {
		t.Fatalf("bad spec: %v", err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Directions) != 2 || st.Directions[0].Spec != "delay 5ms loss 1%" {
		t.Fatalf("stats directions %+v", st.Directions)
	}
	// The credential for TCP control: a token only root and the owner
	// read, removed with the proxy (the "left behind" check below).
	tokPath := control.TokenPath(dir, [2]string{"pa", "pb"})
	if fi, err := os.Lstat(tokPath); err != nil || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
		t.Fatalf("token file %s: %v, %v; want a regular 0600 file", tokPath, fi, err)
	}
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatalf("proxy: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{"pa <-> pb through wl-pa, wl-pb (water backend), seed 3",
		"leaving through pb: delay 10ms", "warning: pa: loss 10% 50% realizes about 0.108%", "stopped, routing restored",
		// The banner names every address the proxy serves.
		"\n  control " + sock + " (token " + control.TokenPath(dir, [2]string{"pa", "pb"}) + ")\n",
		"\n  metrics http://127.0.0.1:", "/metrics (read-only, no token)\n  stop with Ctrl-C\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	// The capture was flushed and closed: a pcapng section header block.
	pc, err := os.ReadFile(filepath.Join(dir, "tap.pcapng"))
	if err != nil || len(pc) < 28 || !bytes.Equal(pc[:4], []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		t.Fatalf("pcapng: %d bytes, %v", len(pc), err)
	}
	os.Remove(filepath.Join(dir, "tap.pcapng"))
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > 0 && !strings.HasSuffix(f, ".lock") {
			t.Errorf("left behind: %s", f)
		}
	}
	if _, err := nl.LinkByName("wl-pa"); err == nil {
		t.Error("TUN wl-pa still exists")
	}
	out, err, _ := runApp(context.Background(), "proxy", "cleanup", "--state-dir", dir)
	if err != nil || !strings.Contains(out, "nothing to clean up") {
		t.Fatalf("cleanup after a clean stop: %q, %v", out, err)
	}
}

// TestProxyErrorHint: a permission error gets the privilege hint once:
// not again when the layer below already named it (host.PrivilegeError,
// as route's and Preflight's errors do).
func TestProxyErrorHint(t *testing.T) {
	plain := proxyError(fmt.Errorf("add rule: %w", os.ErrPermission))
	named := proxyError(&host.PrivilegeError{Err: os.ErrPermission, Hint: "needs root or CAP_NET_ADMIN"})
	whole := proxyError(&host.PrivilegeError{Err: os.ErrPermission, Msg: "needs CAP_NET_ADMIN: run as root"})
	for _, c := range []struct {
		err  error
		want string
	}{
		{plain, "proxy: add rule: permission denied (needs root or CAP_NET_ADMIN)"},
		{named, "proxy: permission denied (needs root or CAP_NET_ADMIN)"},
		{whole, "proxy: needs CAP_NET_ADMIN: run as root"},
	} {
		if c.err.Error() != c.want || !errors.Is(c.err, os.ErrPermission) {
			t.Errorf("got %q, want %q", c.err, c.want)
		}
	}
}
