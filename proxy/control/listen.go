package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/peerlimit"
)

// DefaultDir is where proxies put their control sockets (and the route
// package its state files).
const DefaultDir = host.RunDir

const unixPrefix = "unix:"

// DefaultAddr is the control address of the proxy between interfaces a and
// b: "unix:/run/wanlab/<a>-<b>.sock".
func DefaultAddr(dir string, ifaces [2]string) string {
	if dir == "" {
		dir = DefaultDir
	}
	return unixPrefix + filepath.Join(dir, ifaces[0]+"-"+ifaces[1]+".sock")
}

// FindAddr returns the control address of the one proxy whose socket is in
// dir. With none or several it says so, and the user passes --control.
func FindAddr(dir string) (string, error) {
	if dir == "" {
		dir = DefaultDir
	}
	socks, err := filepath.Glob(filepath.Join(dir, "*.sock"))
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", dir, err)
	}
	var live []string
	for _, s := range socks {
		if fi, err := os.Stat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
			live = append(live, s)
		}
	}
	sort.Strings(live)
	switch len(live) {
	case 0:
		return "", fmt.Errorf("no proxy control socket in %s (is `wanlab proxy` running? else pass --control)", dir)
	case 1:
		return unixPrefix + live[0], nil
	}
	return "", fmt.Errorf("%d proxy control sockets in %s (%s): pass --control", len(live), dir, strings.Join(live, ", "))
}

// parseAddr splits a control address into a network and an address:
// "unix:/path" (or a bare absolute path) or a loopback "host:port".
func parseAddr(addr string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(addr, unixPrefix):
		p := strings.TrimPrefix(addr, unixPrefix)
		if p == "" {
			return "", "", fmt.Errorf("control address %q: empty socket path", addr)
		}
		return "unix", p, nil
	case strings.HasPrefix(addr, "/"):
		return "unix", addr, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("control address %q: want unix:/path or a loopback host:port: %w", addr, err)
	}
	if host == "localhost" {
		return "tcp", addr, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", "", fmt.Errorf("control address %q: %q is not a loopback address (the control API serves only this host: use a unix socket or 127.0.0.1)", addr, host)
	}
	return "tcp", addr, nil
}

// Listen opens the control listener. A unix socket gets mode 0600 (0660
// and acc's group with a control group) in a directory that only this user
// can write (hostfile.Dir: created 0711 if missing, refused if others can
// write to it); a socket left by a dead process is removed, one that a live
// process answers on is refused (naming its pid). TCP addresses must be
// loopback and acc must carry a token.
func Listen(addr string, acc Access) (net.Listener, error) {
	network, address, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	if network == "tcp" {
		if acc.Token == "" {
			return nil, fmt.Errorf("control address %q: a TCP control listener needs a token", addr)
		}
		literal, err := literalLoopback(address)
		if err != nil {
			return nil, fmt.Errorf("control address %q: %w", addr, err)
		}
		l, err := net.Listen("tcp", literal)
		if err != nil {
			return nil, fmt.Errorf("control: %w", err)
		}
		return l, nil
	}
	if err := hostfile.Dir(filepath.Dir(address)); err != nil {
		return nil, fmt.Errorf("control socket directory: %w", err)
	}
	if err := removeStale(address); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", address)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	// Between bind and chmod the socket carries the umask's mode; a
	// process-wide umask change would race with other goroutines' files.
	mode := os.FileMode(0o600)
	if acc.HasGroup {
		mode = 0o660
		if err := os.Lchown(address, -1, acc.Group); err != nil {
			l.Close()
			return nil, fmt.Errorf("control socket %s: giving it to gid %d: %w", address, acc.Group, err)
		}
	}
	if err := os.Chmod(address, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	return l, nil
}

// literalLoopback resolves "localhost:PORT" once, here, to one literal
// loopback address (an IPv4 one where the name has both, as net.Listen
// would choose), so that the proxy writes and clients use that address and
// never the name. A literal address is returned as it is.
func literalLoopback(address string) (string, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return address, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", host, err)
	}
	var pick netip.Addr
	for _, ip := range ips {
		ip = ip.Unmap()
		if !ip.IsLoopback() {
			continue
		}
		if !pick.IsValid() || (ip.Is4() && !pick.Is4()) {
			pick = ip
		}
	}
	if !pick.IsValid() {
		return "", fmt.Errorf("%s resolves to no loopback address", host)
	}
	return net.JoinHostPort(pick.String(), port), nil
}

// removeStale removes a socket file whose listener is gone and refuses one
// that still accepts connections.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control socket %s: exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		defer c.Close()
		if uc, ok := c.(*net.UnixConn); ok && peerlimit.UnixPeerPID(uc) > 0 {
			pid := peerlimit.UnixPeerPID(uc)
			return fmt.Errorf("control socket %s is in use by a running proxy (pid %d)", path, pid)
		}
		return fmt.Errorf("control socket %s is in use by a running proxy", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control: removing stale socket: %w", err)
	}
	return nil
}

// CheckAddr reports what is wrong with a control address without
// listening: a malformed or non-loopback one is refused.
func CheckAddr(addr string) error {
	_, _, err := parseAddr(addr)
	return err
}
