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

	"github.com/wanlab/wanlab/internal/peerlimit"
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

type peerKey struct{}

// withPeer records the peer of c in the request context (http.Server's
// ConnContext), so the guard can check who is asking on a unix socket.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerlimit.Conn); ok {
		if p := pc.Peer(); p.Unix && p.HasUID {
			return context.WithValue(ctx, peerKey{}, p)
		}
	}
	return ctx
}

// guard admits a request or answers 401/403 without reaching the API. A
// refused connection is closed after its answer, so a caller who may not
// use the API holds no slot for long.
type guard struct {
	acc  Access
	euid int
	next http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p, ok := r.Context().Value(peerKey{}).(peerlimit.Peer); ok {
		if !g.admits(p) {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusForbidden, "not admitted to control this proxy")
			return
		}
		g.next.ServeHTTP(w, r)
		return
	}
	if !g.tokenOK(r.Header.Get("Authorization")) {
		w.Header().Set("Connection", "close")
		w.Header().Set("WWW-Authenticate", `Bearer realm="wanlab proxy"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token: send \"Authorization: Bearer TOKEN\" "+
			"with the token in the proxy's .token file (readable by root and the proxy's owner)")
		return
	}
	g.next.ServeHTTP(w, r)
}

func (g *guard) admits(p peerlimit.Peer) bool {
	if p.UID == 0 || p.UID == g.euid {
		return true
	}
	return g.acc.HasGroup && (p.GID == g.acc.Group || slices.Contains(p.Groups, g.acc.Group))
}

func (g *guard) tokenOK(h string) bool {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || g.acc.Token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(g.acc.Token)) == 1
}

// connLimits bound the API's connections: 64 in all, half of them kept for
// root and the proxy's own user, at most 4 for any other uid (or, where the
// kernel does not tell the uid, any other host), so that another user's
// flood of idle connections cannot lock the owner out.
func connLimits(euid int) peerlimit.Limits {
	return peerlimit.Limits{
		Total:    maxConns,
		Reserved: maxConns / 2,
		PerPeer:  4,
		Trusted:  func(p peerlimit.Peer) bool { return p.HasUID && (p.UID == 0 || p.UID == euid) },
	}
}
