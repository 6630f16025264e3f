package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// DefaultStateDir holds one state file per live lab.
const DefaultStateDir = host.RunDir + "/lab"

// stateFile is what a lab records about itself before creating anything:
// enough for Cleanup, run by another process after a crash, to find every
// object and to tell a crashed owner from a live one.
type stateFile struct {
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Start   uint64    `json:"pid_start_ticks"` // field 22 of /proc/PID/stat, against PID reuse
	Created time.Time `json:"created"`
	// Namespaces are the named namespaces; Links the veths by namespace.
	Namespaces []string            `json:"namespaces"`
	Links      map[string][]string `json:"links"`

	path string
}

func createState(dir string, l *Lab) (*stateFile, error) {
	st := &stateFile{
		ID:         l.ID,
		PID:        os.Getpid(),
		Created:    time.Now().UTC(),
		Namespaces: []string{l.Router.NS, l.Client.NS, l.Server.NS},
		Links: map[string][]string{
			l.Router.NS: {l.Router.ClientLink, l.Router.ServerLink},
			l.Client.NS: {l.Client.Link},
			l.Server.NS: {l.Server.Link},
		},
		path: filepath.Join(dir, l.ID+".json"),
	}
	if l.cfg.Outside {
		st.Namespaces = []string{l.Router.NS, l.Client.NS}
		delete(st.Links, l.Server.NS)
	}
	if l.cfg.RouterOnly {
		st.Namespaces = []string{l.Router.NS}
		st.Links = map[string][]string{l.Router.NS: {l.Router.ClientLink, l.Router.ServerLink}}
	}
	st.Start, _ = hostfile.ProcessStart(st.PID)
	if err := hostfile.Dir(dir); err != nil {
		return nil, fmt.Errorf("lab state dir: %w", err)
	}
	for _, ns := range st.Namespaces {
		if nsrun.Exists(ns) {
			return nil, fmt.Errorf("lab %s: namespace %s already exists", l.ID, ns)
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	// O_EXCL: two runs that drew the same ID must not share a state file.
	f, err := hostfile.CreateExclusive(st.path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		os.Remove(st.path)
		return nil, fmt.Errorf("lab state %s: %w", st.path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(st.path)
		return nil, fmt.Errorf("lab state %s: %w", st.path, err)
	}
	return st, nil
}

func (st *stateFile) remove() error {
	if err := os.Remove(st.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lab state: %w", err)
	}
	return nil
}

// readState reads and validates a lab's state file from a directory only
// root can write to: the namespaces Cleanup deletes must be this lab's
// (nsPattern with its ID), the links valid names in those namespaces. A
// tampered file is refused naming the field.
func readState(path string) (*stateFile, error) {
	if _, err := os.Lstat(path); err != nil {
		return nil, err
	}
	if err := hostfile.CheckDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	b, err := hostfile.ReadInput(path, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	st, err := parseState(b)
	if err != nil {
		return nil, fmt.Errorf("lab state %s: %w", path, err)
	}
	st.path = path
	return st, nil
}

func parseState(b []byte) (*stateFile, error) {
	st := &stateFile{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, err
	}
	if !validID(st.ID) {
		return nil, fmt.Errorf("id %q: not a lab id", st.ID)
	}
	ours := map[string]bool{}
	for i, ns := range st.Namespaces {
		m := nsPattern.FindStringSubmatch(ns)
		if m == nil || m[1] != st.ID {
			return nil, fmt.Errorf("namespaces[%d] %q: not a namespace of lab %s", i, ns, st.ID)
		}
		ours[ns] = true
	}
	for ns, links := range st.Links {
		if !ours[ns] {
			return nil, fmt.Errorf("links: namespace %q: not one of the lab's namespaces", ns)
		}
		for i, l := range links {
			if !validLinkName(l) {
				return nil, fmt.Errorf("links[%q][%d] %q: not an interface name", ns, i, l)
			}
		}
	}
	return st, nil
}

// ownerAlive reports whether the process that wrote the state file still
// runs (same PID and same start time, not a zombie).
func (st *stateFile) ownerAlive() bool { return hostfile.Running(st.PID, st.Start) }

// nsPattern matches exactly the namespace names New creates.
var nsPattern = regexp.MustCompile(`^wanlab-([0-9a-z]{1,8})-(client|router|server)$`)

// Cleanup removes the objects of every lab whose owning process is gone:
// first those listed in state files, then namespaces whose names have the
// exact shape New gives them ("wanlab-<id>-client|router|server") but no
// live owner. Labs of running processes are left alone. It returns what it
// removed.
//
// Every lab records itself in the one state directory, DefaultStateDir;
// there is deliberately no option to move it, since a lab recorded
// elsewhere would look orphaned here.
func Cleanup() ([]string, error) {
	stateDir, netnsDir := DefaultStateDir, nsrun.Dir
	// Namespaces are listed before state files are read: a lab created in
	// between writes its state file before its namespaces, so a namespace
	// seen here always has its (live) state file seen below.
	var candidates []string
	if ents, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ents {
			if nsPattern.MatchString(e.Name()) {
				candidates = append(candidates, e.Name())
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("lab cleanup: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(stateDir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("lab cleanup: %w", err)
	}
	var removed []string
	var errs []error
	live := map[string]bool{}
	for _, path := range files {
		st, err := readState(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed by its owner meanwhile
			}
			errs = append(errs, err)
			continue
		}
		if st.ownerAlive() {
			live[st.ID] = true
			continue
		}
		ok := true
		for _, ns := range st.Namespaces {
			if !nsPattern.MatchString(ns) {
				errs = append(errs, fmt.Errorf("lab state %s: namespace %q is not a lab name; left alone", path, ns))
				ok = false
				continue
			}
			if !exists(filepath.Join(netnsDir, ns)) {
				continue
			}
			if err := nsrun.Delete(ns); err != nil {
				errs = append(errs, err)
				ok = false
				continue
			}
			removed = append(removed, "netns "+ns)
		}
		if ok {
			if err := st.remove(); err != nil {
				errs = append(errs, err)
			} else {
				removed = append(removed, "state "+path)
			}
		}
	}
	for _, ns := range candidates {
		id := nsPattern.FindStringSubmatch(ns)[1]
		if live[id] || !exists(filepath.Join(netnsDir, ns)) {
			continue
		}
		if err := nsrun.Delete(ns); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "netns "+ns)
	}
	sort.Strings(removed)
	return removed, errors.Join(errs...)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
