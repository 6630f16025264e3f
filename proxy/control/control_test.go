package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// fakeBackend mimics the proxy: two directions, a spec "parser" that knows
// a few keywords, and fixed counters.
type fakeBackend struct {
	mu    sync.Mutex
	specs map[string]string
	order []string
	sets  int
}

func newFake() *fakeBackend {
	return &fakeBackend{specs: map[string]string{"veth-a": "", "veth-b": "delay 10ms"}, order: []string{"veth-a", "veth-b"}}
}

func (f *fakeBackend) Install(iface string, ch spec.Change) error {
	im, err := ch.Apply(nil)
	if err != nil {
		return err
	}
	canon := im.String()
	f.mu.Lock()
	defer f.mu.Unlock()
	if iface == "" {
		for k := range f.specs {
			f.specs[k] = canon
		}
	} else if _, ok := f.specs[iface]; ok {
		f.specs[iface] = canon
	} else {
		return fmt.Errorf("interface %q: not a direction", iface)
	}
	f.sets++
	return nil
}

func (f *fakeBackend) Specs() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]string, len(f.specs))
	for k, v := range f.specs {
		m[k] = v
	}
	return m
}

func (f *fakeBackend) Stats() Stats {
	specs := f.Specs()
	var st Stats
	for i, name := range f.order {
		st.Directions = append(st.Directions, Direction{
			Iface:  name,
			Spec:   specs[name],
			Engine: engine.Snapshot{Direction: name, Totals: engine.Counters{PacketsIn: uint64(100 * (i + 1)), Drops: engine.Drops{Loss: uint64(i)}}},
			Device: DeviceCounters{Malformed: 3},
		})
	}
	return st
}

// exercise runs the API contract against a client connected to fake.
func exercise(t *testing.T, c *Client, fake *fakeBackend) {
	t.Helper()
	specs, err := c.Specs()
	if err != nil {
		t.Fatal(err)
	}
	if specs["veth-a"] != "" || specs["veth-b"] != "delay 10ms" || len(specs) != 2 {
		t.Fatalf("specs %v", specs)
	}

	got, err := c.SetSpecs("veth-a", "  delay   50ms  loss 1%\n")
	if err != nil {
		t.Fatal(err)
	}
	if got["veth-a"] != "delay 50ms loss 1%" || got["veth-b"] != "delay 10ms" {
		t.Fatalf("after set veth-a: %v", got)
	}

	// A bad spec: the parser's message, unchanged, and the running spec kept.
	err = c.Set("veth-a", "dela 5ms")
	if err == nil || err.Error() != `unknown keyword "dela" at position 1` || !BadSpec(err) {
		t.Fatalf("bad spec: err = %v (bad spec %v)", err, BadSpec(err))
	}
	if specs, _ := c.Specs(); specs["veth-a"] != "delay 50ms loss 1%" {
		t.Fatalf("running spec not kept: %v", specs)
	}

	err = c.Set("eth9", "delay 1ms")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || !strings.Contains(err.Error(), `interface "eth9"`) ||
		!strings.Contains(err.Error(), "veth-a, veth-b") || !BadSpec(err) {
		t.Fatalf("unknown interface: %v", err)
	}

	if err := c.Set("", "tbf rate 1mbit burst 10kb limit 100kb"); err != nil {
		t.Fatal(err)
	}
	if specs, _ := c.Specs(); specs["veth-a"] != specs["veth-b"] || specs["veth-a"] != "tbf rate 1mbit burst 10kb limit 100kb" {
		t.Fatalf("set both: %v", specs)
	}

	if err := c.Set("veth-b", strings.Repeat("delay 1ms ", maxSpecBytes/8)); err == nil || !BadSpec(err) {
		t.Fatalf("oversized spec accepted: %v", err)
	}

	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Directions) != 2 || st.Directions[1].Iface != "veth-b" || st.Directions[1].Engine.Totals.PacketsIn != 200 ||
		st.Directions[1].Engine.Totals.Drops.Loss != 1 || st.Directions[0].Device.Malformed != 3 ||
		st.Directions[0].Spec != "tbf rate 1mbit burst 10kb limit 100kb" {
		t.Fatalf("stats %+v", st)
	}
	raw, err := c.StatsJSON()
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string][]map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil || generic["directions"][0]["iface"] != "veth-a" {
		t.Fatalf("stats JSON %s: %v", raw, err)
	}
	fake.mu.Lock()
	sets := fake.sets
	fake.mu.Unlock()
	if sets != 2 {
		t.Errorf("backend saw %d successful sets, want 2", sets)
	}
}

func TestAPIOverLoopbackTCP(t *testing.T) {
	fake := newFake()
	srv := httptest.NewServer(NewHandler(fake, Access{Token: "t0k"}))
	defer srv.Close()
	exercise(t, Dial(strings.TrimPrefix(srv.URL, "http://")).WithToken("t0k"), fake)

	// Wrong methods and paths.
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, "/v1/specs"}, {http.MethodDelete, "/v1/specs/veth-a"}, {http.MethodPut, "/v1/stats"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		req.Header.Set("Authorization", "Bearer t0k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %s, want 405", tc.method, tc.path, resp.Status)
		}
	}
}

func TestAPIOverUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "veth-a-veth-b.sock")
	addr := "unix:" + sock
	fake := newFake()
	s, err := Start(addr, fake, Access{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	if di, _ := os.Stat(filepath.Dir(sock)); di.Mode().Perm() != 0o711 {
		t.Errorf("created socket directory mode %v, want 0711 (only its owner lists or writes)", di.Mode().Perm())
	}
	exercise(t, Dial(addr), fake)

	// A second proxy on the same socket is refused, naming the live one.
	_, err = Listen(addr, Access{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by a running proxy (pid %d)", os.Getpid())) {
		t.Fatalf("second Listen: %v", err)
	}
	if found, err := FindAddr(filepath.Dir(sock)); err != nil || found != addr {
		t.Errorf("FindAddr = %q, %v; want %q", found, err, addr)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after Close: %v", err)
	}
	if err := Dial(addr).Set("", "delay 1ms"); err == nil {
		t.Error("Set on a closed proxy succeeded")
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a-b.sock")
	// A socket file whose process died: bound, never unlinked.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket missing: %v", err)
	}
	l2, err := Listen("unix:"+sock, Access{})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
}

func TestListenRefuses(t *testing.T) {
	notSock := filepath.Join(t.TempDir(), "file.sock")
	if err := os.WriteFile(notSock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"0.0.0.0:0":       "not a loopback address",
		"10.1.2.3:8080":   "not a loopback address",
		":8080":           "not a loopback address",
		"[::]:0":          "not a loopback address",
		"example.com:80":  "not a loopback address",
		"nonsense":        "want unix:/path or a loopback host:port",
		"unix:":           "empty socket path",
		"unix:" + notSock: "exists and is not a socket",
	} {
		l, err := Listen(addr, Access{Token: "x"})
		if err == nil {
			l.Close()
			t.Errorf("Listen(%q) succeeded", addr)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Listen(%q) = %v, want %q", addr, err, want)
		}
		if err := Dial(addr).Set("", ""); err == nil && want != "exists and is not a socket" {
			t.Errorf("Dial(%q) accepted", addr)
		}
	}
	if l, err := Listen("127.0.0.1:0", Access{}); err == nil || !strings.Contains(err.Error(), "needs a token") {
		if l != nil {
			l.Close()
		}
		t.Errorf("Listen on TCP without a token: %v, want refused", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := Listen(addr, Access{Token: "x"})
		if err != nil {
			if strings.Contains(addr, "::1") {
				t.Logf("no IPv6 loopback here: %v", err)
				continue
			}
			t.Fatalf("Listen(%q): %v", addr, err)
		}
		l.Close()
	}
}

func TestFindAddr(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindAddr(dir); err == nil || !strings.Contains(err.Error(), "no proxy control socket") {
		t.Errorf("empty dir: %v", err)
	}
	// State files and other files are not sockets.
	if err := os.WriteFile(filepath.Join(dir, "x.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var ls []net.Listener
	for _, n := range []string{"a-b.sock", "c-d.sock"} {
		l, err := Listen("unix:"+filepath.Join(dir, n), Access{})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	_, err := FindAddr(dir)
	if err == nil || !strings.Contains(err.Error(), "2 proxy control sockets") || !strings.Contains(err.Error(), "pass --control") {
		t.Errorf("two sockets: %v", err)
	}
	ls[1].Close()
	if got, err := FindAddr(dir); err != nil || got != "unix:"+filepath.Join(dir, "a-b.sock") {
		t.Errorf("one socket: %q %v", got, err)
	}
	ls[0].Close()
	if got := DefaultAddr("", [2]string{"eth0", "eth1"}); got != "unix:/run/wanlab/eth0-eth1.sock" {
		t.Errorf("DefaultAddr = %q", got)
	}
}

// FuzzParseAddr checks that no input panics and that whatever Listen would
// accept over TCP names a loopback host.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"unix:/run/wanlab/a-b.sock", "/tmp/x.sock", "127.0.0.1:9000", "[::1]:1",
		"localhost:80", "0.0.0.0:1", ":80", "unix:", "[::ffff:127.0.0.1]:5", "127.1:2", "[fe80::1%lo]:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		network, address, err := parseAddr(addr)
		if err != nil {
			if network != "" || address != "" {
				t.Fatalf("error with a result: %q %q", network, address)
			}
			return
		}
		switch network {
		case "unix":
			if address == "" {
				t.Fatal("empty socket path accepted")
			}
		case "tcp":
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				t.Fatalf("accepted %q: %v", address, err)
			}
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				t.Fatalf("accepted non-loopback %q", address)
			}
		default:
			t.Fatalf("network %q", network)
		}
	})
}
