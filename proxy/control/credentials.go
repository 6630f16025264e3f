package control

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/internal/hostfile"
)

// The files a running proxy keeps beside its state, so that its owner's
// commands (`wanlab proxy set|stats`) can reach it over loopback TCP:
// <A>-<B>.token holds the bearer token (mode 0600: root and the proxy's
// user), <A>-<B>.control its Endpoint (the literal address it listens on, its pid,
// start time and uid). Both go when
// the proxy stops.
const (
	tokenSuffix   = ".token"
	addressSuffix = ".control"
)

// TokenPath is the token file of the proxy between ifaces.
func TokenPath(dir string, ifaces [2]string) string {
	if dir == "" {
		dir = DefaultDir
	}
	return filepath.Join(dir, ifaces[0]+"-"+ifaces[1]+tokenSuffix)
}

// WriteCredentials writes the token and endpoint files of the proxy
// between ifaces (never through a link, hostfile.WriteAtomic) and returns
// the function that removes them.
func WriteCredentials(dir string, ifaces [2]string, ep Endpoint, token string) (remove func() error, err error) {
	tokPath := TokenPath(dir, ifaces)
	addrPath := endpointPath(tokPath)
	remove = func() error {
		return errors.Join(removeIfThere(tokPath), removeIfThere(addrPath))
	}
	if err := checkLiteral(ep.Address); err != nil {
		return nil, fmt.Errorf("control address file %s: %w", addrPath, err)
	}
	if err := hostfile.WriteAtomic(tokPath, []byte(token+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("control token %s: %w", tokPath, err)
	}
	if err := hostfile.WriteAtomic(addrPath, ep.marshal(), 0o600); err != nil {
		remove()
		return nil, fmt.Errorf("control address file %s: %w", addrPath, err)
	}
	return remove, nil
}

func endpointPath(tokPath string) string {
	return strings.TrimSuffix(tokPath, tokenSuffix) + addressSuffix
}

func removeIfThere(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// maxTokenBytes bounds a token file: 64 hex digits and a newline.
const maxTokenBytes = 1 << 10

// ReadToken reads a token file: its first line (a regular file, no link,
// no FIFO, at most 1 KiB).
func ReadToken(path string) (string, error) {
	b, err := readSmallFile(path, maxTokenBytes)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return "", fmt.Errorf("control token %s: %w (readable by root and the proxy's owner)", path, err)
		}
		return "", fmt.Errorf("control token %s: %w", path, err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("control token %s: empty", path)
	}
	return tok, nil
}

// Found is a running proxy's endpoint as its files in dir say, with the
// path of its token.
type Found struct {
	Endpoint
	File      string // the .control file
	TokenFile string
}

// FindTCP finds the proxy in dir that listens on the TCP control address
// addr. A literal address must be the one the proxy wrote; a name
// (localhost) is not resolved here, where another user could answer on the
// name's other address: it matches the one loopback listener on that port
// that a proxy in dir wrote. A proxy whose process is gone is reported as
// ErrStale, naming its files, and nothing is sent to it.
func FindTCP(dir, addr string) (Found, error) {
	if dir == "" {
		dir = DefaultDir
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Found{}, fmt.Errorf("control address %q: %w", addr, err)
	}
	literal, lerr := netip.ParseAddr(host)
	files, err := filepath.Glob(filepath.Join(dir, "*"+addressSuffix))
	if err != nil {
		return Found{}, err
	}
	var match []Found
	var problems []error
	for _, f := range files {
		ep, err := ReadEndpoint(f)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		ap, err := netip.ParseAddrPort(ep.Address)
		if err != nil || strconv.Itoa(int(ap.Port())) != port {
			continue // a unix socket, or another port
		}
		if lerr == nil && ap.Addr() != literal.Unmap() {
			continue
		}
		match = append(match, Found{Endpoint: ep, File: f, TokenFile: strings.TrimSuffix(f, addressSuffix) + tokenSuffix})
	}
	switch {
	case len(match) == 1:
		m := match[0]
		if !m.Alive() {
			return m, fmt.Errorf("control %s: the proxy that wrote %s (pid %d) is not running: %w; nothing sent "+
				"(`wanlab proxy cleanup` removes them)", addr, m.File, m.PID, ErrStale)
		}
		return m, nil
	case len(match) > 1:
		var as []string
		for _, m := range match {
			as = append(as, m.Address)
		}
		return Found{}, fmt.Errorf("control %s: proxies in %s listen on %s: pass one of these literal addresses", addr, dir, strings.Join(as, ", "))
	}
	if len(problems) > 0 {
		return Found{}, fmt.Errorf("no proxy in %s listens on %s (%v)", dir, addr, errors.Join(problems...))
	}
	if lerr != nil {
		return Found{}, fmt.Errorf("no proxy in %s listens on %s: a name is matched only against the literal addresses "+
			"proxies write there; pass the address the proxy printed (e.g. 127.0.0.1:%s) and --token-file", dir, addr, port)
	}
	return Found{}, fmt.Errorf("no proxy in %s listens on %s (pass --token-file, or run this where the proxy runs)", dir, addr)
}

// IsTCP reports whether addr is a TCP control address (as opposed to a
// unix socket).
func IsTCP(addr string) bool {
	network, _, err := parseAddr(addr)
	return err == nil && network == "tcp"
}

// RemoveStaleCredentials removes the .token and .control files in dir of
// proxies that are no longer running (a .control whose pid is gone or
// started later, or that does not parse), and tokens left without a
// .control for over a minute (a crash between the two writes). It returns
// what it removed. A live proxy's files are left alone.
func RemoveStaleCredentials(dir string) ([]string, error) {
	if dir == "" {
		dir = DefaultDir
	}
	var removed []string
	var errs []error
	rm := func(p string) {
		if err := os.Remove(p); err == nil {
			removed = append(removed, "credentials "+p)
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	ctls, err := filepath.Glob(filepath.Join(dir, "*"+addressSuffix))
	if err != nil {
		return nil, err
	}
	for _, f := range ctls {
		if ep, err := ReadEndpoint(f); err == nil && ep.Alive() {
			continue
		}
		rm(strings.TrimSuffix(f, addressSuffix) + tokenSuffix)
		rm(f)
	}
	toks, err := filepath.Glob(filepath.Join(dir, "*"+tokenSuffix))
	if err != nil {
		return removed, err
	}
	for _, f := range toks {
		if _, err := os.Lstat(endpointPath(f)); err == nil {
			continue
		}
		if fi, err := os.Lstat(f); err == nil && time.Since(fi.ModTime()) > time.Minute {
			rm(f)
		}
	}
	return removed, errors.Join(errs...)
}
