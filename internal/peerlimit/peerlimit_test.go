package peerlimit

import (
	"net"
	"os"
	"runtime"
	"testing"
)

func TestAdmitLimits(t *testing.T) {
	root := Peer{HasUID: true, UID: 0}
	nobody := Peer{HasUID: true, UID: 65534}
	other := Peer{HasUID: true, UID: 1000}
	l := &Listener{lim: Limits{Total: 6, Reserved: 3, PerPeer: 2, Trusted: func(p Peer) bool { return p.HasUID && p.UID == 0 }},
		perPeer: map[string]int{}}
	var rel []func()
	admit := func(p Peer) bool {
		r, ok := l.admit(p)
		if ok {
			rel = append(rel, r)
		}
		return ok
	}
	// One untrusted peer: PerPeer.
	if !admit(nobody) || !admit(nobody) || admit(nobody) {
		t.Fatal("nobody: want 2 admitted, the third refused")
	}
	// Untrusted together: Total-Reserved = 3.
	if !admit(other) || admit(other) {
		t.Fatal("other: want 1 admitted (3 untrusted slots), then refused")
	}
	// Root has the reserved slots and no per-peer bound.
	for i := range 3 {
		if !admit(root) {
			t.Fatalf("root's connection %d refused", i)
		}
	}
	if admit(root) {
		t.Fatal("root beyond Total admitted")
	}
	// A slot freed twice counts once.
	rel[0]()
	rel[0]()
	if !admit(nobody) || admit(nobody) {
		t.Fatal("after one release: want exactly one more nobody connection")
	}
	if l.refused != 4 {
		t.Fatalf("refused %d, want 4", l.refused)
	}
}

// TestPeerOfLoopback: the kernel names the uid at the other end of a
// loopback TCP connection (sock_diag) and of a unix socket (SO_PEERCRED).
func TestPeerOfLoopback(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sock_diag is Linux's")
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v", addr, err)
			continue
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		p := PeerOf(s)
		if !p.HasUID || p.UID != os.Geteuid() {
			t.Errorf("%s: peer %+v, want uid %d", addr, p, os.Geteuid())
		}
		// The server's end, seen from the client.
		uid, ok := TCPOwner(c.RemoteAddr().(*net.TCPAddr), c.LocalAddr().(*net.TCPAddr))
		if !ok || uid != os.Geteuid() {
			t.Errorf("%s: server socket owner %d %v, want %d", addr, uid, ok, os.Geteuid())
		}
		c.Close()
		s.Close()
		ln.Close()
	}
	sock := t.TempDir() + "/s"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p := PeerOf(s); !p.Unix || !p.HasUID || p.UID != os.Geteuid() {
		t.Errorf("unix peer %+v", p)
	}
	if pid := UnixPeerPID(c.(*net.UnixConn)); pid != os.Getpid() {
		t.Errorf("unix peer pid %d, want %d", pid, os.Getpid())
	}
}
