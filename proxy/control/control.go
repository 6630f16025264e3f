// Package control is the proxy's runtime API: HTTP on a unix socket (or a
// loopback address) to replace a direction's impairment spec while traffic
// flows and to read the counters, and the client the CLI uses.
//
//	GET /v1/specs          {"eth1": "delay 50ms", ...}   egress iface -> canonical spec
//	PUT /v1/specs/{iface}  body: spec text               replace one direction's spec
//	PUT /v1/specs          body: spec text               replace both directions' specs
//	GET /v1/stats          Stats                          counters per direction
//
// A PUT answers with the specs now in force, or 400 and {"error": "..."}
// carrying the parser's one-line message (the running spec is kept).
//
// Who may use it (see Access): on a unix socket the peer process's
// credentials (SO_PEERCRED) must be root's, the proxy's own user's or those
// of a member of the control group; on loopback TCP every request carries
// "Authorization: Bearer TOKEN" with the token the proxy wrote to a file
// only root and its owner can read. A refused request changes nothing and
// learns nothing but the refusal. The API never reads a file for a caller:
// a body starting with '@' (a file reference on the command line) is
// refused, and no answer quotes bytes the caller did not send.
package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wanlab/wanlab/internal/peerlimit"
	"github.com/wanlab/wanlab/tc/spec"
)

// Backend is what the control API drives: the running proxy.
type Backend interface {
	// Install replaces the impairment of the direction leaving through
	// iface ("" = both) by what ch makes of it, parsed once where the
	// request arrived. On a change that does not apply it returns the
	// error and keeps the running impairment.
	Install(iface string, ch spec.Change) error
	// Specs maps each egress interface to its canonical spec.
	Specs() map[string]string
	// Stats returns the counters of every direction.
	Stats() Stats
}

// Warner is an optional capability of a Backend: the warnings of each
// direction's spec in force. Answers about specs then carry one
// "Wanlab-Warning: IFACE: TEXT" header per warning.
type Warner interface {
	Warnings() map[string][]string
}

// WarningHeader is the header of a spec warning.
const WarningHeader = "Wanlab-Warning"

// maxSpecBytes bounds a PUT body: a spec is one line of tc arguments, a
// class tree some hundred lines.
const maxSpecBytes = 1 << 20

// Limits of one connection, so that a slow, stalled or endless client can
// hold neither the proxy nor its memory: a request's headers within 2 s
// (so a connection that sends nothing is closed then), the request and
// the answer within 10 s each, 30 s idle, and at most maxConns
// connections open at once, shared by peer (connLimits; more are closed
// at accept).
var timeouts = peerlimit.Timeouts{ReadHeader: 2 * time.Second, Read: 10 * time.Second, Write: 10 * time.Second,
	Idle: 30 * time.Second, MaxHeaderBytes: 16 << 10}

const maxConns = 64

// serverOf is the API's http.Server of h: its timeouts, and each
// request's peer in its context (withPeer).
func serverOf(h http.Handler) *http.Server {
	srv := timeouts.Server(h)
	srv.ConnContext = withPeer
	return srv
}

// errorBody is the JSON of every non-2xx answer.
type errorBody struct {
	Error string `json:"error"`
}

// NewHandler serves the API for b to the callers acc admits. Requests
// that did not arrive on a unix socket served by Serve (whose peer
// credentials it records) must carry acc's bearer token.
func NewHandler(b Backend, acc Access) http.Handler {
	h := &handler{b: b}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/specs", h.getSpecs)
	mux.HandleFunc("PUT /v1/specs", h.putSpecs)
	mux.HandleFunc("PUT /v1/specs/{iface}", h.putSpecs)
	mux.HandleFunc("GET /v1/stats", h.getStats)
	return &guard{acc: acc, euid: os.Geteuid(), next: mux}
}

type handler struct{ b Backend }

func (h *handler) getSpecs(w http.ResponseWriter, _ *http.Request) {
	h.warn(w)
	writeJSON(w, http.StatusOK, h.b.Specs())
}

// warn adds the backend's spec warnings to an answer's headers.
func (h *handler) warn(w http.ResponseWriter) {
	wr, ok := h.b.(Warner)
	if !ok {
		return
	}
	m := wr.Warnings()
	for _, iface := range sortedKeys(m) {
		for _, line := range m[iface] {
			w.Header().Add(WarningHeader, iface+": "+line)
		}
	}
}

func (h *handler) getStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.b.Stats())
}

func (h *handler) putSpecs(w http.ResponseWriter, r *http.Request) {
	iface := r.PathValue("iface")
	if iface != "" {
		specs := h.b.Specs()
		if _, ok := specs[iface]; !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("interface %q: not a direction of this proxy (have %s)",
				iface, strings.Join(sortedKeys(specs), ", ")))
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSpecBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("spec longer than %d bytes", maxSpecBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "reading spec: "+err.Error())
		return
	}
	// The body is spec text in the canonical form (or any form the
	// parser takes), parsed here once into the value installed.
	ch, err := spec.ParseChange(string(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := h.b.Install(iface, ch); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	h.warn(w)
	writeJSON(w, http.StatusOK, h.b.Specs())
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away: nothing to do
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// Server serves the API on a listener until closed.
type Server struct {
	srv  *http.Server
	l    net.Listener
	done chan error

	closeOnce sync.Once
	closeErr  error
}

// Start listens on addr (see Listen) and serves b to the callers acc
// admits.
func Start(addr string, b Backend, acc Access) (*Server, error) {
	l, err := Listen(addr, acc)
	if err != nil {
		return nil, err
	}
	s, err := Serve(l, b, acc)
	if err != nil {
		l.Close()
		return nil, err
	}
	return s, nil
}

// Serve serves b on l until Close. A TCP listener needs acc.Token.
func Serve(l net.Listener, b Backend, acc Access) (*Server, error) {
	if _, isUnix := l.(*net.UnixListener); !isUnix && acc.Token == "" {
		return nil, errors.New("control: a TCP control listener needs a token")
	}
	s := &Server{
		srv:  serverOf(NewHandler(b, acc)),
		l:    peerlimit.New(l, connLimits(os.Geteuid())),
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(s.l) }()
	return s, nil
}

// Addr returns the listener's address.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Close stops serving, closes open connections and removes a unix socket.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		err := s.srv.Close()
		if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Endpoint is this server's endpoint: its literal address and this
// process, as a proxy writes it to its .control file.
func (s *Server) Endpoint() (Endpoint, error) { return SelfEndpoint(s.l) }
