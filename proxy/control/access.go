package control

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Access says who, beside root and the proxy's own user, may use the API.
type Access struct {
	// Token is the bearer token every request over TCP must carry
	// ("Authorization: Bearer TOKEN"). A TCP listener without one is
	// refused.
	Token string
	// Group, with HasGroup, also admits the members of this group (by gid,
	// primary or supplementary) on the unix socket, whose file then gets
	// this group and mode 0660.
	Group    int
	HasGroup bool
}

// NewToken returns a fresh random token: 32 bytes from crypto/rand, in hex.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("control token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// peer is what a connection tells about the process at its other end.
type peer struct {
	unix   bool // a unix socket connection with readable credentials
	uid    int
	gid    int
	groups []int // supplementary groups (SO_PEERGROUPS), when the kernel tells
}

type peerKey struct{}

// withPeer records the peer of c in the request context (http.Server's
// ConnContext), so the guard can check who is asking.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		c = lc.Conn
	}
	if uc, ok := c.(*net.UnixConn); ok {
		if p, ok := peerCred(uc); ok {
			return context.WithValue(ctx, peerKey{}, p)
		}
	}
	return ctx
}

// guard admits a request or answers 401/403 without reaching the API.
type guard struct {
	acc  Access
	euid int
	next http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p, ok := r.Context().Value(peerKey{}).(peer); ok && p.unix {
		if !g.admits(p) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("uid %d may not control this proxy (%s)", p.uid, g.who()))
			return
		}
		g.next.ServeHTTP(w, r)
		return
	}
	if !g.tokenOK(r.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wanlab proxy"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token: send \"Authorization: Bearer TOKEN\" "+
			"with the token in the proxy's .token file (readable by root and the proxy's owner)")
		return
	}
	g.next.ServeHTTP(w, r)
}

func (g *guard) admits(p peer) bool {
	if p.uid == 0 || p.uid == g.euid {
		return true
	}
	return g.acc.HasGroup && (p.gid == g.acc.Group || slices.Contains(p.groups, g.acc.Group))
}

func (g *guard) who() string {
	w := "allowed: root"
	if g.euid != 0 {
		w += fmt.Sprintf(", uid %d", g.euid)
	}
	if g.acc.HasGroup {
		w += fmt.Sprintf(", members of gid %d", g.acc.Group)
	}
	return w
}

func (g *guard) tokenOK(h string) bool {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || g.acc.Token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(g.acc.Token)) == 1
}

// limitListener closes connections beyond max at accept, so a flood of
// idle connections cannot grow the proxy's memory or file table; each
// admitted connection is bounded in time by the server's timeouts.
type limitListener struct {
	net.Listener
	max    int64
	active atomic.Int64
}

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, max: int64(max)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > l.max {
			l.active.Add(-1)
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.active.Add(-1) })
	return err
}
