// Package client changes a running wanlab link from Go tests: dial a proxy,
// a shell or a lab by its control address, set a direction's spec, read
// the counters and reset, as toxiproxy's clients do.
//
// It speaks the proxy's authenticated control API (package proxy/control)
// and weakens none of its checks: on a unix socket the caller must be
// root, the proxy's user or a member of its control group; over loopback
// TCP it sends the proxy's bearer token, and only to the listener the
// proxy's .control file names. A shell's directions are "up" (from the
// command) and "down" (to it); a proxy's are its egress interfaces.
package client

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/wanlab/wanlab/proxy/control"
)

// EnvControl is the variable wanlab shell sets for its command: the
// shell's control address, Dial's default.
const EnvControl = "WANLAB_CONTROL"

// Stats is the proxy's counters, one entry per direction.
type Stats = control.Stats

// Link is a running link seen through its control API.
type Link struct {
	addr    string
	c       *control.Client
	initial map[string]string
}

// Option changes how Dial reaches a link.
type Option func(*options)

type options struct {
	token, tokenFile, dir string
}

// WithToken sends token with every request: a TCP control address needs
// the proxy's token (Dial reads it from the proxy's token file when it can
// read that file).
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTokenFile reads the token from path.
func WithTokenFile(path string) Option { return func(o *options) { o.tokenFile = path } }

// Dial reaches the link at addr: "unix:/path", a socket path, or a
// loopback host:port; "" means $WANLAB_CONTROL. It reads the link's specs
// once, to check that the link answers and that the caller is admitted,
// and so that Reset can restore them.
func Dial(addr string, opts ...Option) (*Link, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if addr == "" {
		if addr = os.Getenv(EnvControl); addr == "" {
			return nil, fmt.Errorf("client: no control address (pass one, or run inside wanlab shell, which sets $%s)", EnvControl)
		}
	}
	var c *control.Client
	if control.IsTCP(addr) {
		found, err := control.FindTCP(o.dir, addr)
		switch {
		case err == nil:
			c = control.DialEndpoint(found.Endpoint)
			if o.token == "" && o.tokenFile == "" {
				o.tokenFile = found.TokenFile
			}
		case errors.Is(err, control.ErrStale) || (o.token == "" && o.tokenFile == ""):
			return nil, fmt.Errorf("client: %w", err)
		default:
			c = control.Dial(addr)
		}
	} else {
		c = control.Dial(addr)
	}
	if o.tokenFile != "" {
		tok, err := control.ReadToken(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		o.token = tok
	}
	if o.token != "" {
		c = c.WithToken(o.token)
	}
	l := &Link{addr: addr, c: c}
	specs, err := c.Specs()
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	l.initial = specs
	return l, nil
}

// Addr is the control address the link was dialled at.
func (l *Link) Addr() string { return l.addr }

// Set replaces the spec of one direction ("up", "down", an interface
// name) or of both (""), atomically: packets already queued keep the
// timing they entered under. An empty spec removes the impairment. A bad
// spec is refused with the parser's one-line message and the running one
// kept (BadSpec reports it).
func (l *Link) Set(direction, spec string) error {
	if _, err := l.c.SetSpecs(direction, spec); err != nil {
		return fmt.Errorf("client: set %s: %w", describe(direction), err)
	}
	return nil
}

// Specs returns each direction's spec in force, in canonical form.
func (l *Link) Specs() (map[string]string, error) {
	specs, err := l.c.Specs()
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return specs, nil
}

// Stats returns the link's counters.
func (l *Link) Stats() (Stats, error) {
	st, err := l.c.Stats()
	if err != nil {
		return st, fmt.Errorf("client: %w", err)
	}
	return st, nil
}

// Reset gives every direction back the spec it had when Dial reached the
// link.
func (l *Link) Reset() error {
	dirs := make([]string, 0, len(l.initial))
	for d := range l.initial {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		if err := l.Set(d, l.initial[d]); err != nil {
			return err
		}
	}
	return nil
}

// BadSpec reports whether err is the link refusing a spec or a direction
// it does not have: the caller's input was wrong.
func BadSpec(err error) bool { return control.BadSpec(err) }

func describe(direction string) string {
	if direction == "" {
		return "both directions"
	}
	return direction
}
