package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/wanlab/wanlab/internal/hostfile"
)

// Endpoint is what a running proxy writes to <A>-<B>.control: the literal
// address its control API listens on (never a name), and who it is, so that
// a client can check, before it sends the token, that the socket it reached
// is the proxy's.
type Endpoint struct {
	// Address is the literal address the listener is bound to:
	// "127.0.0.1:9901", "[::1]:9901" or "unix:/run/wanlab/A-B.sock".
	Address string `json:"address"`
	// PID is the proxy's process, Start its start time in clock ticks since
	// boot (/proc/PID/stat), so that a reused pid is not taken for it.
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	// UID is the user the proxy runs as: the owner of its listening socket.
	UID int `json:"uid"`
}

// maxEndpointBytes bounds a .control file: one small JSON object.
const maxEndpointBytes = 4 << 10

// ParseEndpoint reads a .control file's contents; name is used in errors.
// Everything is checked: a literal loopback TCP address or a unix socket
// path, a positive pid, a uid in range.
func ParseEndpoint(name string, b []byte) (Endpoint, error) {
	var ep Endpoint
	if len(b) > maxEndpointBytes {
		return ep, fmt.Errorf("control file %s: longer than %d bytes", name, maxEndpointBytes)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ep); err != nil {
		return Endpoint{}, fmt.Errorf("control file %s: %v", name, err)
	}
	if dec.More() {
		return Endpoint{}, fmt.Errorf("control file %s: data after the object", name)
	}
	if err := checkLiteral(ep.Address); err != nil {
		return Endpoint{}, fmt.Errorf("control file %s: address: %w", name, err)
	}
	if ep.PID <= 0 || ep.PID > 1<<22 {
		return Endpoint{}, fmt.Errorf("control file %s: pid %d: not a process id", name, ep.PID)
	}
	if ep.UID < 0 || ep.UID >= 1<<32-1 {
		return Endpoint{}, fmt.Errorf("control file %s: uid %d: out of range", name, ep.UID)
	}
	return ep, nil
}

// checkLiteral accepts what a proxy writes: "unix:" and an absolute path
// without "..", or a literal loopback IP and port.
func checkLiteral(addr string) error {
	if p, ok := strings.CutPrefix(addr, unixPrefix); ok {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
			return fmt.Errorf("%q: not a clean absolute socket path", addr)
		}
		return nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("%q: not a literal ip:port", addr)
	}
	if !ap.Addr().IsLoopback() || ap.Port() == 0 {
		return fmt.Errorf("%q: not a loopback address with a port", addr)
	}
	return nil
}

// ReadEndpoint reads and checks a .control file: a regular file (no link,
// no FIFO), at most maxEndpointBytes long.
func ReadEndpoint(path string) (Endpoint, error) {
	b, err := readSmallFile(path, maxEndpointBytes)
	if err != nil {
		return Endpoint{}, fmt.Errorf("control file %s: %w", path, err)
	}
	return ParseEndpoint(path, b)
}

// ErrStale says a .control file names a proxy that is no longer running:
// its credentials are left from a crash and nothing is sent.
var ErrStale = errors.New("stale proxy credentials")

// Alive reports whether the proxy the endpoint names is still running: its
// pid exists and started when the proxy did.
func (ep Endpoint) Alive() bool {
	start, err := hostfile.ProcessStart(ep.PID)
	return err == nil && start == ep.Start
}

// SelfEndpoint is the endpoint of this process listening on l.
func SelfEndpoint(l net.Listener) (Endpoint, error) {
	ep := Endpoint{PID: os.Getpid(), UID: os.Geteuid()}
	switch a := l.Addr().(type) {
	case *net.UnixAddr:
		ep.Address = unixPrefix + a.Name
	case *net.TCPAddr:
		ep.Address = a.AddrPort().String()
		if ap, err := netip.ParseAddrPort(ep.Address); err == nil {
			ep.Address = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
		}
	default:
		return ep, fmt.Errorf("control listener %v: not unix or TCP", l.Addr())
	}
	start, err := hostfile.ProcessStart(ep.PID)
	if err != nil {
		return ep, fmt.Errorf("control: own start time: %w", err)
	}
	ep.Start = start
	return ep, nil
}

func (ep Endpoint) marshal() []byte {
	b, _ := json.Marshal(ep)
	return append(b, '\n')
}

// readAtMost reads r to its end, refusing more than max bytes.
func readAtMost(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("more than %d bytes", max)
	}
	return b, nil
}
