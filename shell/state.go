package shell

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/units"
)

// StateDir holds the shells' journals: per shell StateDir/<lab id>/ with
// host.json (what the shell changed in the namespace it was started in)
// and its proxy's route state and control socket, and one forwarding
// hold file per namespace (forward.go).
const StateDir = host.RunDir + "/shell"

// lockName serialises the shells of the host while they pick subnets,
// build, and take or release a forwarding hold.
const lockName = "shell.lock"

// hostJournal is what a shell records, before it makes the change, about
// the namespace it was started in: where it is, and that it made a NAT
// table and holds forwarding there. Its namespaces and veths are the
// lab's (lab.Cleanup).
type hostJournal struct {
	ID         string `json:"id"`
	Owner      owner  `json:"owner"`
	Netns      string `json:"netns,omitempty"`
	NetnsInode uint64 `json:"netns_inode"`
	NAT        bool   `json:"nat"`
	Forwarding bool   `json:"forwarding"`
}

func journalPath(id string) string { return filepath.Join(StateDir, id, "host.json") }

func (j *hostJournal) save() error {
	if err := hostfile.Dir(filepath.Dir(journalPath(j.ID))); err != nil {
		return fmt.Errorf("shell state: %w", err)
	}
	return hostfile.WriteJSON(journalPath(j.ID), j, "shell journal")
}

// maxJournalBytes bounds a journal: a few hundred bytes of JSON.
const maxJournalBytes = 64 << 10

func readJournal(path string) (*hostJournal, error) {
	j := &hostJournal{}
	if err := readJSON(path, maxJournalBytes, j, "shell journal"); err != nil {
		return nil, err
	}
	if filepath.Base(filepath.Dir(path)) != j.ID || !lab.ValidID(j.ID) {
		return nil, fmt.Errorf("shell journal %s: id %q: not this directory's lab id", path, j.ID)
	}
	if err := host.CheckNetnsName(j.Netns); j.Netns != "" && err != nil {
		return nil, fmt.Errorf("shell journal %s: netns: %w", path, err)
	}
	return j, nil
}

// undo removes the NAT table and releases the forwarding hold of a
// journal whose owner is gone, inside the namespace it names; a
// namespace that is gone took both with it.
func (j *hostJournal) undo() error {
	run := inNetns(j.Netns, j.NetnsInode)
	var errs []error
	if j.NAT && run != nil {
		if err := run(func() error { return deleteNAT(j.ID) }); err != nil {
			errs = append(errs, err)
		}
	}
	if j.Forwarding {
		o := j.Owner
		if err := releaseForwarding(StateDir, j.NetnsInode, &o, run); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Cleanup undoes what shells whose process is gone left: their NAT
// tables and forwarding holds (from their journals), their namespaces and
// veths (lab.Cleanup), and their state directories. Shells that still run
// are left alone. It returns what it removed.
func Cleanup() ([]string, error) {
	var removed []string
	var errs []error
	if _, err := os.Stat(StateDir); err == nil {
		lock, err := hostfile.LockFile(filepath.Join(StateDir, lockName), false)
		if err != nil {
			return nil, fmt.Errorf("shell cleanup: %w", err)
		}
		r, err := cleanupJournals()
		lock.Unlock(false)
		removed, errs = append(removed, r...), append(errs, err)
	}
	labs, err := lab.Cleanup()
	removed, errs = append(removed, labs...), append(errs, err)
	dirs, err := lab.RemoveStaleStateDirs(StateDir, "shell")
	removed, errs = append(removed, dirs...), append(errs, err)
	sort.Strings(removed)
	return removed, errors.Join(errs...)
}

// cleanupJournals undoes the journals of dead shells, then releases the
// forwarding holds whose holders are all dead. The caller holds the lock.
func cleanupJournals() ([]string, error) {
	var removed []string
	var errs []error
	paths, _ := filepath.Glob(filepath.Join(StateDir, "*", "host.json"))
	for _, p := range paths {
		j, err := readJournal(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if j.Owner.alive() {
			continue
		}
		if err := j.undo(); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("shell journal: %w", err))
			continue
		}
		if j.NAT {
			removed = append(removed, "nat table "+natTableName(j.ID))
		}
		removed = append(removed, "journal "+p)
	}
	holds, _ := filepath.Glob(filepath.Join(StateDir, "forward-*.json"))
	for _, p := range holds {
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "forward-"), ".json"), 10, 64)
		if err != nil {
			continue // not a hold file
		}
		h, err := readHold(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := releaseForwarding(StateDir, ino, nil, inNetns(h.Netns, ino)); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			removed = append(removed, "forwarding hold "+p)
		}
	}
	return removed, errors.Join(errs...)
}

// readJSON decodes the file at path, of at most limit bytes, into v,
// refusing fields v does not have; errors name what (and the path).
func readJSON(path string, limit units.Size, v any, what string) error {
	b, err := hostfile.ReadInput(path, limit)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}
