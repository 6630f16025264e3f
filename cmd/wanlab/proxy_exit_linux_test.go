package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/control"
)

// mainArgsEnv makes this test binary run wanlab's main with the arguments
// it holds (JSON), so that a test can signal a real wanlab process.
const mainArgsEnv = "WANLAB_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	testenv.RunChildIfAsked()
	if js := os.Getenv(mainArgsEnv); js != "" {
		var args []string
		if err := json.Unmarshal([]byte(js), &args); err != nil {
			os.Exit(100)
		}
		os.Args = append([]string{"wanlab"}, args...)
		main()
	}
	os.Exit(m.Run())
}

// twoVeths makes a namespace with the veth pairs pa/pa2 and pb/pb2 up.
func twoVeths(t *testing.T) (string, netns.NsHandle) {
	t.Helper()
	ns, h := testenv.NetNS(t)
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	for _, name := range []string{"pa", "pb"} {
		if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "2"}); err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{name, name + "2"} {
			link, _ := nl.LinkByName(l)
			nl.LinkSetUp(link)
		}
	}
	return ns, h
}

// TestProxyExitPathsRemoveCredentials: whatever ends a proxy (SIGTERM,
// SIGHUP, a closed stdout and SIGPIPE) removes its .token and .control;
// after SIGKILL, which nothing can catch, the client refuses the dead
// proxy's credentials and `proxy cleanup` removes them.
func TestProxyExitPathsRemoveCredentials(t *testing.T) {
	testenv.RequireRoot(t)
	ns, _ := twoVeths(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		sig         syscall.Signal
		closeStdout bool
	}{
		{"SIGTERM", syscall.SIGTERM, false},
		{"SIGHUP", syscall.SIGHUP, false},
		{"closed stdout", syscall.SIGTERM, true},
		{"SIGKILL", syscall.SIGKILL, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			args, _ := json.Marshal([]string{"proxy", "--iface", "pa", "--iface", "pb", "--netns", ns,
				"--state-dir", dir, "--control", "127.0.0.1:0", "--backend", "water"})
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(args))
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout, cmd.Stderr = w, w
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if c.closeStdout {
				r.Close() // every write of the proxy's now meets a closed pipe
			} else {
				defer r.Close()
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					<-exited
				}
			})
			ctl := filepath.Join(dir, "pa-pb.control")
			tok := filepath.Join(dir, "pa-pb.token")
			var ep control.Endpoint
			testenv.WaitFor(t, "the proxy's .control file", func() bool {
				select {
				case err := <-exited:
					t.Fatalf("proxy exited before writing its endpoint: %v", err)
				default:
				}
				ep, err = control.ReadEndpoint(ctl)
				return err == nil
			})
			if ep.PID != cmd.Process.Pid || !ep.Alive() {
				t.Fatalf("endpoint %+v, want pid %d, alive", ep, cmd.Process.Pid)
			}
			if ap, err := netip.ParseAddrPort(ep.Address); err != nil || ap.Addr() != netip.MustParseAddr("127.0.0.1") || ap.Port() == 0 {
				t.Fatalf("endpoint address %q, want the literal 127.0.0.1 and the port bound", ep.Address)
			}
			old := proxyControlDir
			proxyControlDir = dir
			defer func() { proxyControlDir = old }()
			if c.closeStdout {
				// A SIGPIPE from outside is no reason to stop either.
				cmd.Process.Signal(syscall.SIGPIPE)
			}
			if out, err, _ := runApp(context.Background(), "proxy", "stats", "--control", ep.Address); err != nil {
				t.Fatalf("stats of the running proxy: %v\n%s", err, out)
			}
			cmd.Process.Signal(c.sig)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Fatal("proxy still running 30 s after the signal")
			}
			_, terr := os.Lstat(tok)
			_, cerr := os.Lstat(ctl)
			if c.sig != syscall.SIGKILL {
				if !errors.Is(terr, os.ErrNotExist) || !errors.Is(cerr, os.ErrNotExist) {
					t.Fatalf("after %s: token %v, endpoint %v: want both removed", c.name, terr, cerr)
				}
				return
			}
			if terr != nil || cerr != nil {
				t.Fatalf("after SIGKILL the files should still be there for this test: %v %v", terr, cerr)
			}
			_, err, code := runApp(context.Background(), "proxy", "stats", "--control", ep.Address)
			if err == nil || code == 0 || !errors.Is(err, control.ErrStale) {
				t.Fatalf("stats of a killed proxy: exit %d, %v; want a refusal naming stale credentials", code, err)
			}
			out, err, _ := runApp(context.Background(), "proxy", "cleanup", "--state-dir", dir)
			if err != nil || !strings.Contains(out, "removed credentials "+tok) || !strings.Contains(out, "removed credentials "+ctl) {
				t.Fatalf("cleanup after SIGKILL: %v\n%s", err, out)
			}
			for _, f := range []string{tok, ctl} {
				if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still there after cleanup", f)
				}
			}
		})
	}
}

// TestProxyCommandsIgnoreALoopbackSquatter: with another user listening on
// [::1] at the proxy's port, `proxy stats --control localhost:PORT` reaches
// the proxy (on the literal 127.0.0.1 its .control names), and `proxy set`
// to the squatter's address is refused before the token leaves: the
// squatter receives no byte.
func TestProxyCommandsIgnoreALoopbackSquatter(t *testing.T) {
	testenv.RequireRoot(t)
	fake, addr, dir := startFakeTCP(t)
	_, port, _ := strings.Cut(addr, ":")
	sq := testenv.StartAs(t, 65534, "squat [::1]:"+port)
	if out, err, code := runApp(context.Background(), "proxy", "stats", "--control", "localhost:"+port, "--json"); err != nil || code != 0 {
		t.Fatalf("stats by name: exit %d, %v\n%s", code, err, out)
	}
	tok := control.TokenPath(dir, [2]string{"veth-a", "veth-b"})
	_, err, code := runApp(context.Background(), "proxy", "set", "--control", "[::1]:"+port, "--token-file", tok, "veth-a=loss 100%")
	if err == nil || code == 0 || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("set to the squatter: exit %d, %v; want a refusal naming uid 65534", code, err)
	}
	if got := sq.Stop(t); !strings.HasSuffix(got, " bytes 0") {
		t.Fatalf("squatter saw %q, want no byte", got)
	}
	if fake.Specs()["veth-a"] != "" {
		t.Fatalf("the proxy's spec changed: %v", fake.Specs())
	}
}
