package control

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.RunChildIfAsked()
	os.Exit(m.Run())
}

// serveWithCredentials starts a fake proxy on addr with a token and writes
// its .token and .control files in a directory of their own.
func serveWithCredentials(t *testing.T, addr string) (*Server, *fakeBackend, string) {
	t.Helper()
	fake := newFake()
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(addr, fake, Access{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ep, err := s.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := WriteCredentials(dir, [2]string{"a", "b"}, ep, tok); err != nil {
		t.Fatal(err)
	}
	return s, fake, dir
}

// TestLoopbackSquatterGetsNoRequest: another user listening on [::1] at
// the proxy's port (where localhost resolves first on many systems)
// receives no byte from the owner's commands: a name is matched against
// the literal address the proxy wrote, and a literal address whose
// listener is not the proxy's is refused before anything is sent.
func TestLoopbackSquatterGetsNoRequest(t *testing.T) {
	testenv.RequireRoot(t)
	const nobody = 65534
	s, fake, dir := serveWithCredentials(t, "localhost:0")
	ap := s.Addr().(*net.TCPAddr)
	if ap.IP.To4() == nil {
		t.Fatalf("localhost resolved by the proxy to %v, want the IPv4 loopback", ap)
	}
	ep, err := ReadEndpoint(filepath.Join(dir, "a-b.control"))
	if err != nil {
		t.Fatal(err)
	}
	if ep.Address != ap.String() || ep.PID != os.Getpid() || ep.UID != 0 {
		t.Fatalf("endpoint %+v, want the literal %s, this pid and uid 0", ep, ap)
	}
	port := strconv.Itoa(ap.Port)
	sq := testenv.StartAs(t, nobody, "squat [::1]:"+port)

	// By name: found in the .control files, sent to the literal address.
	found, err := FindTCP(dir, "localhost:"+port)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ReadToken(found.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DialEndpoint(found.Endpoint).WithToken(tok).Stats(); err != nil {
		t.Fatalf("stats by name: %v", err)
	}
	// The squatter's address: with the proxy's endpoint (uid 0 expected)
	// and without one (as with --token-file): refused, naming the owner.
	other := found.Endpoint
	other.Address = "[::1]:" + port
	for name, c := range map[string]*Client{"endpoint": DialEndpoint(other), "token-file": Dial("[::1]:" + port)} {
		err := c.WithToken(tok).Set("veth-a", "loss 100%")
		if err == nil || !strings.Contains(err.Error(), "uid 65534") || !strings.Contains(err.Error(), "nothing sent") {
			t.Errorf("%s: set to the squatter: %v, want a refusal naming uid 65534", name, err)
		}
	}
	// A name without a .control to match is not resolved by the client.
	if err := Dial("localhost:"+port).WithToken(tok).Set("veth-a", "loss 100%"); err == nil {
		t.Error("a name dialled without its .control: sent")
	}
	if got := sq.Stop(t); !strings.HasSuffix(got, " bytes 0") {
		t.Fatalf("squatter saw %q, want no byte", got)
	}
	if fake.sets != 0 {
		t.Fatalf("%d sets reached the proxy", fake.sets)
	}
}

// TestStaleCredentialsSendNothing: a .control whose proxy died names a
// port another user now holds; the client says the proxy is gone and
// connects nowhere, and RemoveStaleCredentials removes both files.
func TestStaleCredentialsSendNothing(t *testing.T) {
	testenv.RequireRoot(t)
	const nobody = 65534
	// A port nobody holds, and a pid that has exited.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	sq := testenv.StartAs(t, nobody, "squat "+addr)
	dir := t.TempDir()
	ep := Endpoint{Address: addr, PID: dead.Process.Pid, Start: 1, UID: 0}
	if _, err := WriteCredentials(dir, [2]string{"a", "b"}, ep, "0123"); err != nil {
		t.Fatal(err)
	}
	_, err = FindTCP(dir, addr)
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("FindTCP of a dead proxy: %v, want ErrStale", err)
	}
	// Even a client holding the endpoint checks it before each request.
	if _, err := DialEndpoint(ep).WithToken("0123").Stats(); !errors.Is(err, ErrStale) {
		t.Fatalf("DialEndpoint of a dead proxy: %v, want ErrStale", err)
	}
	if got := sq.Stop(t); got != "conns 0 bytes 0" {
		t.Fatalf("the port's new owner saw %q, want no connection", got)
	}
	removed, err := RemoveStaleCredentials(dir)
	if err != nil || len(removed) != 2 {
		t.Fatalf("RemoveStaleCredentials: %v %v, want the token and the .control", removed, err)
	}
	// A live proxy's files stay.
	_, _, live := serveWithCredentials(t, "127.0.0.1:0")
	if removed, err := RemoveStaleCredentials(live); err != nil || len(removed) != 0 {
		t.Fatalf("RemoveStaleCredentials of a live proxy: %v %v", removed, err)
	}
}

// TestFloodDoesNotLockOutTheOwner: another user holding 200 idle
// connections (dialling again as they are closed) takes at most its own
// share of slots: the owner's requests succeed 10 of 10.
func TestFloodDoesNotLockOutTheOwner(t *testing.T) {
	testenv.RequireRoot(t)
	const nobody = 65534
	s, _, dir := serveWithCredentials(t, "127.0.0.1:0")
	fl := testenv.StartAs(t, nobody, "flood "+s.Addr().String()+" 200")
	found, err := FindTCP(dir, s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ReadToken(found.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		c := DialEndpoint(found.Endpoint).WithToken(tok)
		if _, err := c.Stats(); err != nil {
			t.Fatalf("owner's stats %d of 10 under the flood: %v", i+1, err)
		}
	}
	if r := s.l.(interface{ Refused() uint64 }).Refused(); r == 0 {
		t.Fatal("the flood had no connection refused at accept: it did not reach the limit")
	}
	fl.Stop(t)
}

// TestUnauthenticatedConnectionsClose: a connection refused once is closed
// after its answer, and one that sends nothing is closed after
// timeouts.ReadHeader.
func TestUnauthenticatedConnectionsClose(t *testing.T) {
	s, _, _ := serveWithCredentials(t, "127.0.0.1:0")
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := c.Write([]byte(req + req)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading until the close: %v", err)
	}
	if n := strings.Count(string(b), "HTTP/1.1 401"); n != 1 {
		t.Fatalf("%d answers before the close, want one 401:\n%s", n, b)
	}
	idle, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	start := time.Now()
	idle.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Fatal("an idle connection got data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("an idle connection stayed open 30 s")
	}
	if d := time.Since(start); d < timeouts.ReadHeader-100*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before the %v it is given", d, timeouts.ReadHeader)
	}
}

// TestSocketFileOwnerIsTheServer: on a unix socket a client also accepts
// the socket file's owner as the server (a proxy running as its own user
// serving its control group), but only from a directory no one else may
// write to.
func TestSocketFileOwnerIsTheServer(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "a-b.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := os.Lchown(sock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	dial := func() *net.UnixConn {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	if !ownsSocketFile(dial(), 65534) {
		t.Error("the socket file's owner in a private directory: refused")
	}
	if ownsSocketFile(dial(), 1000) {
		t.Error("a uid that does not own the socket file: accepted")
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if ownsSocketFile(dial(), 65534) {
		t.Error("a socket file in a directory anyone may write to: accepted")
	}
}
