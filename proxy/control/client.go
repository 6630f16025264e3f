package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Client talks to a proxy's control API.
type Client struct {
	addr  string
	base  string // URL prefix: http://unix for sockets, http://host:port for TCP
	http  *http.Client
	token string // sent as "Authorization: Bearer" when set
	err   error  // a bad address, reported by every call
}

// WithToken makes c send token with every request (needed over TCP).
func (c *Client) WithToken(token string) *Client {
	c.token = token
	return c
}

// APIError is an answer other than 2xx. Its message is the server's
// one-line text (for a bad spec: the parser's message).
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return e.Message }

// Is makes a refused caller (401, 403) match os.ErrPermission.
func (e *APIError) Is(target error) bool {
	return target == os.ErrPermission && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

// BadSpec reports whether err is the proxy rejecting a spec (or naming an
// interface it does not have): the user's input was wrong.
func BadSpec(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusBadRequest ||
		ae.Status == http.StatusNotFound || ae.Status == http.StatusRequestEntityTooLarge)
}

// Dial returns a client for addr ("unix:/path", a bare socket path or a
// loopback host:port). It connects on each call, and before it sends
// anything checks that the server is root's or this user's (verifyServer).
func Dial(addr string) *Client {
	return dial(addr, nil)
}

// DialEndpoint returns a client for the proxy a .control file describes:
// each call first checks that the proxy is still running and that the
// socket it reaches is that proxy's (its uid, and the listener held by its
// pid); else it fails naming what it found, and no token leaves.
func DialEndpoint(ep Endpoint) *Client {
	return dial(ep.Address, &ep)
}

func dial(addr string, ep *Endpoint) *Client {
	c := &Client{addr: addr}
	network, address, err := parseAddr(addr)
	if err != nil {
		c.err = err
		return c
	}
	if network == "tcp" && ep == nil {
		if host, _, _ := net.SplitHostPort(address); host == "localhost" {
			// Resolving here could reach another user's listener on the
			// name's other address (::1 first on many systems).
			c.err = fmt.Errorf("control address %q: a name needs the proxy's .control file to find the literal address; "+
				"pass the address the proxy printed (127.0.0.1:PORT or [::1]:PORT)", addr)
			return c
		}
	}
	tr := &http.Transport{MaxIdleConns: 1, IdleConnTimeout: 30 * time.Second}
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		if ep != nil && !ep.Alive() {
			return nil, fmt.Errorf("the proxy (pid %d) is not running: %w; nothing sent", ep.PID, ErrStale)
		}
		conn, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if err := verifyServer(conn, ep); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
	c.base = "http://" + address
	if network == "unix" {
		c.base = "http://unix"
	}
	c.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return c
}

// Set replaces the spec of the direction leaving through iface ("" = both).
func (c *Client) Set(iface, spec string) error {
	_, err := c.SetSpecs(iface, spec)
	return err
}

// SetSpecs is Set returning the specs in force afterwards.
func (c *Client) SetSpecs(iface, spec string) (map[string]string, error) {
	specs, _, err := c.SetSpecsWarnings(iface, spec)
	return specs, err
}

// SetSpecsWarnings is SetSpecs also returning the proxy's warnings about
// the specs in force ("IFACE: TEXT", the Wanlab-Warning headers).
func (c *Client) SetSpecsWarnings(iface, spec string) (map[string]string, []string, error) {
	path := "/v1/specs"
	if iface != "" {
		path += "/" + url.PathEscape(iface)
	}
	var specs map[string]string
	h, err := c.doHeader(http.MethodPut, path, strings.NewReader(spec), &specs)
	if err != nil {
		return nil, nil, err
	}
	return specs, h.Values(WarningHeader), nil
}

// Specs returns each egress interface's canonical spec.
func (c *Client) Specs() (map[string]string, error) {
	var specs map[string]string
	err := c.do(http.MethodGet, "/v1/specs", nil, &specs)
	return specs, err
}

// Stats returns the proxy's counters.
func (c *Client) Stats() (Stats, error) {
	var st Stats
	err := c.do(http.MethodGet, "/v1/stats", nil, &st)
	return st, err
}

// StatsJSON returns the raw JSON of the proxy's counters.
func (c *Client) StatsJSON() ([]byte, error) {
	var raw json.RawMessage
	err := c.do(http.MethodGet, "/v1/stats", nil, &raw)
	return raw, err
}

func (c *Client) do(method, path string, body io.Reader, out any) error {
	_, err := c.doHeader(method, path, body, out)
	return err
}

func (c *Client) doHeader(method, path string, body io.Reader, out any) (http.Header, error) {
	if c.err != nil {
		return nil, c.err
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("control %s: %w", c.addr, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("control %s: %w", c.addr, unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("control %s: reading answer: %w", c.addr, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb errorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			return nil, &APIError{Status: resp.StatusCode, Message: eb.Error}
		}
		return nil, &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("control %s: %s %s: %s",
			c.addr, method, path, resp.Status)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("control %s: decoding answer to %s %s: %w", c.addr, method, path, err)
	}
	return resp.Header, nil
}

// unwrapURL drops url.Error's "Put \"http://unix/v1/...\":" prefix, which
// shows a made-up URL for unix sockets, keeping the cause.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
