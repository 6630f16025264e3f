package control

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/wanlab/wanlab/internal/hostfile"
)

// The files a running proxy keeps beside its state, so that its owner's
// commands (`wanlab proxy set|stats`) can reach it over loopback TCP:
// <A>-<B>.token holds the bearer token (mode 0600: root and the proxy's
// user), <A>-<B>.control the control address it listens on. Both go when
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

// WriteCredentials writes the token and control address files of the
// proxy between ifaces (never through a link, hostfile.WriteAtomic) and
// returns the function that removes them.
func WriteCredentials(dir string, ifaces [2]string, addr, token string) (remove func() error, err error) {
	tokPath := TokenPath(dir, ifaces)
	addrPath := strings.TrimSuffix(tokPath, tokenSuffix) + addressSuffix
	remove = func() error {
		return errors.Join(removeIfThere(tokPath), removeIfThere(addrPath))
	}
	if err := hostfile.WriteAtomic(tokPath, []byte(token+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("control token %s: %w", tokPath, err)
	}
	if err := hostfile.WriteAtomic(addrPath, []byte(addr+"\n"), 0o600); err != nil {
		remove()
		return nil, fmt.Errorf("control address file %s: %w", addrPath, err)
	}
	return remove, nil
}

func removeIfThere(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ReadToken reads a token file: its first line.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return "", fmt.Errorf("control token %s: %w (readable by root and the proxy's owner)", path, err)
		}
		return "", fmt.Errorf("control token: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("control token %s: empty", path)
	}
	return tok, nil
}

// TokenFor finds the token of the proxy in dir that listens on the TCP
// control address addr (by the address files proxies write beside their
// tokens).
func TokenFor(dir, addr string) (string, error) {
	if dir == "" {
		dir = DefaultDir
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"+addressSuffix))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if sameTCPAddr(strings.TrimSpace(string(b)), addr) {
			return ReadToken(strings.TrimSuffix(f, addressSuffix) + tokenSuffix)
		}
	}
	return "", fmt.Errorf("no proxy in %s listens on %s (pass --token-file, or run this where the proxy runs)", dir, addr)
}

// sameTCPAddr compares two loopback host:port addresses, taking localhost
// and 127.0.0.1 for the same host.
func sameTCPAddr(a, b string) bool {
	if a == b {
		return true
	}
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	norm := func(h string) string {
		if h == "localhost" {
			return "127.0.0.1"
		}
		if ip := net.ParseIP(h); ip != nil {
			return ip.String()
		}
		return h
	}
	return norm(ha) == norm(hb)
}

// IsTCP reports whether addr is a TCP control address (as opposed to a
// unix socket).
func IsTCP(addr string) bool {
	network, _, err := parseAddr(addr)
	return err == nil && network == "tcp"
}
