// Package peerlimit bounds the connections a server holds, in total and per
// peer, so that one local user (or one remote host) cannot take every slot
// of a server its owner also uses. A peer is a uid where the kernel tells
// it (unix socket credentials; for loopback TCP, the owner of the client's
// socket as sock_diag reports it), else the remote address.
package peerlimit

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Peer is who is at the other end of a connection.
type Peer struct {
	// HasUID says UID is the peer process's user (read from the kernel,
	// not from anything the peer sent).
	HasUID bool
	UID    int
	// GID and Groups are the peer's primary and supplementary groups, where
	// the kernel tells them (unix sockets).
	GID    int
	Groups []int
	// Unix says the connection came on a unix socket with readable
	// credentials.
	Unix bool
	// Host is the remote IP address of a TCP peer ("" on unix sockets).
	Host string
}

// key is the peer's slot account: its uid when known, else its host.
func (p Peer) key() string {
	if p.HasUID {
		return fmt.Sprintf("uid %d", p.UID)
	}
	return "host " + p.Host
}

// Limits are a listener's connection bounds.
type Limits struct {
	// Total bounds all open connections.
	Total int
	// Reserved of Total are kept for trusted peers: the others together
	// hold at most Total-Reserved.
	Reserved int
	// PerPeer bounds one untrusted peer's open connections.
	PerPeer int
	// Trusted says a peer may use the reserved slots and is not held to
	// PerPeer (the server's owner, root). Nil trusts nobody.
	Trusted func(Peer) bool
}

// Listener enforces Limits at accept: a connection beyond them is closed at
// once. Every accepted connection is a *Conn that knows its Peer.
type Listener struct {
	net.Listener
	lim    Limits
	lookup func(net.Conn) Peer

	mu      sync.Mutex
	total   int
	others  int
	perPeer map[string]int
	refused uint64
}

// New wraps l. Limits' zero fields mean no bound of that kind.
func New(l net.Listener, lim Limits) *Listener {
	return &Listener{Listener: l, lim: lim, lookup: PeerOf, perPeer: make(map[string]int)}
}

// Accept returns the next connection within the limits.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p := l.lookup(c)
		if release, ok := l.admit(p); ok {
			return &Conn{Conn: c, peer: p, release: release}, nil
		}
		c.Close()
	}
}

// Refused is the number of connections closed at accept.
func (l *Listener) Refused() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

func (l *Listener) admit(p Peer) (release func(), ok bool) {
	trusted := l.lim.Trusted != nil && l.lim.Trusted(p)
	k := p.key()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.lim.Total > 0 && l.total >= l.lim.Total,
		!trusted && l.lim.Total > 0 && l.others >= l.lim.Total-l.lim.Reserved,
		!trusted && l.lim.PerPeer > 0 && l.perPeer[k] >= l.lim.PerPeer:
		l.refused++
		return nil, false
	}
	l.total++
	if !trusted {
		l.others++
		l.perPeer[k]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if !trusted {
				l.others--
				if l.perPeer[k]--; l.perPeer[k] <= 0 {
					delete(l.perPeer, k)
				}
			}
		})
	}, true
}

// Conn is an admitted connection; closing it frees its slot.
type Conn struct {
	net.Conn
	peer    Peer
	release func()
}

// Peer is who the kernel says is at the other end.
func (c *Conn) Peer() Peer { return c.peer }

// Close closes the connection and frees its slot (once).
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// Unwrap returns the connection underneath.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// Timeouts bound how long one connection may hold a server (so that a
// slow, stalled or endless client holds neither its slot nor memory): the
// request's headers within ReadHeader, the whole request within Read, the
// answer within Write, an idle keep-alive connection closes after Idle,
// and headers are at most MaxHeaderBytes.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

// Server is an http.Server of h with the timeouts t, which logs nothing:
// a client's broken requests are no line on the proxy's stderr.
func (t Timeouts) Server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write,
		IdleTimeout: t.Idle, MaxHeaderBytes: t.MaxHeaderBytes, ErrorLog: log.New(io.Discard, "", 0)}
}
