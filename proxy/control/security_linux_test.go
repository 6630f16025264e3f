package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
)

// The child half of TestUnprivilegedCallersAreRefused: run as an
// unprivileged user, it makes each request it is given and prints one JSON
// answer per request.
const childEnv = "WANLAB_CONTROL_TEST_CHILD"

// childGroups are the supplementary groups runAs gives the child.
var childGroups []uint32

type childRequest struct {
	Network, Addr, Method, Path, Token, Body string
}

type childAnswer struct {
	Status int
	Body   string
	Err    string
}

func TestChildProcess(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("helper process of TestUnprivilegedCallersAreRefused")
	}
	var reqs []childRequest
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &reqs); err != nil {
		fmt.Println(`{"Err":"bad requests"}`)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range reqs {
		enc.Encode(doRaw(r))
	}
	os.Exit(0)
}

func doRaw(r childRequest) childAnswer {
	tr := &http.Transport{DialContext: nil}
	base := "http://" + r.Addr
	if r.Network == "unix" {
		base = "http://unix"
		var d net.Dialer
		addr := r.Addr
		tr.Dial = func(string, string) (net.Conn, error) { return d.Dial("unix", addr) }
	}
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	req, err := http.NewRequest(r.Method, base+r.Path, strings.NewReader(r.Body))
	if err != nil {
		return childAnswer{Err: err.Error()}
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return childAnswer{Err: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return childAnswer{Status: resp.StatusCode, Body: string(b)}
}

// runAs runs the requests as uid/gid in a copy of this test binary that
// the unprivileged user may execute.
func runAs(t *testing.T, uid, gid int, reqs []childRequest) []childAnswer {
	t.Helper()
	js, _ := json.Marshal(reqs)
	cmd := testenv.ChildCommand(t, uid, gid, childGroups, "^TestChildProcess$", childEnv+"="+string(js))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child as uid %d: %v\n%s", uid, err, out)
	}
	var answers []childAnswer
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var a childAnswer
		if json.Unmarshal(sc.Bytes(), &a) == nil {
			answers = append(answers, a)
		}
	}
	if len(answers) != len(reqs) {
		t.Fatalf("child answered %d of %d requests:\n%s", len(answers), len(reqs), out)
	}
	return answers
}

// TestUnprivilegedCallersAreRefused: another local user can neither change
// nor read a running proxy, over its unix socket (even one whose file mode
// lets them connect) or over loopback TCP, and nothing a refused or a file
// reference request gets back quotes a file.
func TestUnprivilegedCallersAreRefused(t *testing.T) {
	testenv.RequireRoot(t)
	const nobody = 65534
	dir, err := os.MkdirTemp("", "wanlab-control-sec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The socket directory must be traversable and the socket writable by
	// the other user, so that the refusal comes from the peer check and
	// not from the file system.
	sock := filepath.Join(dir, "a-b.sock")
	fake := newFake()
	us, err := Start("unix:"+sock, fake, Access{})
	if err != nil {
		t.Fatal(err)
	}
	defer us.Close()
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	token, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Start("127.0.0.1:0", fake, Access{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	tcp := ts.Addr().String()
	other, _ := NewToken() // another proxy's token

	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("SECRETWORD second words\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := fake.Specs()

	reqs := []childRequest{
		{Network: "unix", Addr: sock, Method: "PUT", Path: "/v1/specs", Body: "delay 500ms loss 50%"},
		{Network: "unix", Addr: sock, Method: "PUT", Path: "/v1/specs/veth-a", Body: "@" + secret},
		{Network: "unix", Addr: sock, Method: "GET", Path: "/v1/stats"},
		{Network: "tcp", Addr: tcp, Method: "PUT", Path: "/v1/specs", Body: "delay 500ms loss 50%"},
		{Network: "tcp", Addr: tcp, Method: "PUT", Path: "/v1/specs", Body: "@" + secret},
		{Network: "tcp", Addr: tcp, Method: "PUT", Path: "/v1/specs", Token: other, Body: "delay 500ms"},
		{Network: "tcp", Addr: tcp, Method: "GET", Path: "/v1/stats"},
		{Network: "tcp", Addr: tcp, Method: "GET", Path: "/v1/specs", Token: "Bearer"},
	}
	want := []int{403, 403, 403, 401, 401, 401, 401, 401}
	for i, a := range runAs(t, nobody, nobody, reqs) {
		r := reqs[i]
		if a.Status != want[i] {
			t.Errorf("%s %s %s as nobody: %d %q %s, want %d", r.Network, r.Method, r.Path, a.Status, a.Body, a.Err, want[i])
		}
		// A refusal says only that the caller is not admitted: no uid, no
		// gid of those who are.
		if a.Status == 403 && (!strings.Contains(a.Body, "not admitted") || strings.Contains(a.Body, "uid") || strings.Contains(a.Body, "gid")) {
			t.Errorf("%s %s %s as nobody: 403 body %q, want only \"not admitted\"", r.Network, r.Method, r.Path, a.Body)
		}
		if strings.Contains(a.Body, "SECRETWORD") || strings.Contains(a.Body, "delay") {
			t.Errorf("%s %s %s as nobody: answer quotes what the caller did not send or may not read: %q", r.Network, r.Method, r.Path, a.Body)
		}
	}
	if got := fake.Specs(); fmt.Sprint(got) != fmt.Sprint(before) || fake.sets != 0 {
		t.Fatalf("specs changed by refused requests: %v (was %v), %d sets", got, before, fake.sets)
	}

	// The owner (root here) may, over both; a file reference is refused
	// without reading the file, also for the owner.
	c := Dial(tcp).WithToken(token)
	if err := c.Set("veth-a", "delay 5ms"); err != nil {
		t.Fatalf("owner over TCP with the token: %v", err)
	}
	err = Dial("unix:"+sock).Set("veth-a", "@"+secret)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "names a file") ||
		strings.Contains(err.Error(), "SECRETWORD") {
		t.Fatalf("owner sending @FILE: %v, want 400 naming the file reference and no content", err)
	}
	if err := Dial(tcp).Set("veth-a", "delay 7ms"); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("owner over TCP without the token: %v, want a permission error", err)
	}
	if got := fake.Specs()["veth-a"]; got != "delay 5ms" {
		t.Fatalf("veth-a = %q, want the owner's delay 5ms", got)
	}
}

// TestControlGroupMembersAreAdmitted: with a control group, a member (by
// primary or supplementary gid) may use the socket, another user may not.
func TestControlGroupMembersAreAdmitted(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, group = 65534, 4242
	dir, err := os.MkdirTemp("", "wanlab-control-grp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "sub", "a-b.sock")
	fake := newFake()
	s, err := Start("unix:"+sock, fake, Access{Group: group, HasGroup: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Gid != group {
		t.Fatalf("socket mode %04o gid %d, want 0660 and gid %d", fi.Mode().Perm(), st.Gid, group)
	}
	put := []childRequest{{Network: "unix", Addr: sock, Method: "PUT", Path: "/v1/specs/veth-a", Body: "loss 1%"}}
	if a := runAs(t, uid, group, put); a[0].Status != 200 {
		t.Fatalf("member by primary gid: %d %q %s, want 200", a[0].Status, a[0].Body, a[0].Err)
	}
	// Supplementary membership: the child's groups list.
	if a := runAsGroups(t, uid, uid, []uint32{group}, put); a[0].Status != 200 {
		t.Fatalf("member by supplementary gid: %d %q %s, want 200", a[0].Status, a[0].Body, a[0].Err)
	}
	// Not a member: the file mode already keeps it out (0660), so refused
	// either at connect or by the peer check.
	a := runAs(t, uid, uid, []childRequest{{Network: "unix", Addr: sock, Method: "PUT", Path: "/v1/specs/veth-a", Body: "loss 9%"}})
	if a[0].Status == 200 {
		t.Fatalf("non-member admitted: %+v", a[0])
	}
	if got := fake.Specs()["veth-a"]; got != "loss 1%" {
		t.Fatalf("veth-a = %q, want loss 1%%", got)
	}
}

func runAsGroups(t *testing.T, uid, gid int, groups []uint32, reqs []childRequest) []childAnswer {
	t.Helper()
	old := childGroups
	childGroups = groups
	defer func() { childGroups = old }()
	return runAs(t, uid, gid, reqs)
}

// TestOversizedBodyIsCutOff: a 100 MB spec is refused after the limit,
// without the server reading it all, and changes nothing.
func TestOversizedBodyIsCutOff(t *testing.T) {
	fake := newFake()
	s, err := Start("127.0.0.1:0", fake, Access{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const size = 100 << 20
	body := &countingReader{left: size}
	req, _ := http.NewRequest("PUT", "http://"+s.Addr().String()+"/v1/specs", body)
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("100 MB body: %s %s, want 413", resp.Status, b)
		}
	}
	// Either way (an answer, or the connection closed under the client's
	// writes), the server stopped reading near the limit: what the client
	// could push is the limit plus the two sockets' buffers, far below the
	// body.
	if sent := size - body.left; sent > 32<<20 {
		t.Fatalf("the server read %d MB of a 100 MB body", sent>>20)
	}
	if fake.sets != 0 {
		t.Fatalf("an oversized body changed the spec")
	}
}

type countingReader struct{ left int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > r.left {
		n = r.left
	}
	for i := range p[:n] {
		p[i] = 'x'
	}
	r.left -= n
	return int(n), nil
}

// TestSlowClientDoesNotStallTheOwner: a client that sends one byte a
// second holds only its own connection: the owner's set goes through
// meanwhile, and the slow connection is closed by the read deadline.
func TestSlowClientDoesNotStallTheOwner(t *testing.T) {
	fake := newFake()
	s, err := Start("127.0.0.1:0", fake, Access{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.Addr().String()
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		head := "PUT /v1/specs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Length: 1000\r\n\r\n"
		if _, err := slow.Write([]byte(head)); err != nil {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := slow.Write([]byte("d")); err != nil {
					return
				}
			}
		}
	}()
	// The owner's set must not wait for the slow client. It gets the
	// client's own 10 s timeout, far more than a set takes even on a
	// loaded machine; serialized behind the slow body it would wait for
	// the server's read deadline (timeouts.Read) first.
	done := make(chan error, 1)
	go func() { done <- Dial(addr).WithToken("tok").Set("veth-a", "delay 3ms") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("owner's set beside a slow client: %v", err)
		}
	case <-time.After(timeouts.Read - time.Second):
		t.Fatal("owner's set waited for the slow client")
	}
	// The slow connection is cut by the read deadline: wait for the close.
	slow.SetReadDeadline(time.Now().Add(timeouts.Read + 20*time.Second))
	if _, err := io.ReadAll(slow); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("slow connection still open after %v", timeouts.Read+20*time.Second)
		}
	}
	if got := fake.Specs()["veth-a"]; got != "delay 3ms" {
		t.Fatalf("veth-a = %q", got)
	}
}
