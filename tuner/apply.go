package tuner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
)

// Assignment is one KEY=VALUE to write.
type Assignment struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ParseAssignment parses "net.ipv4.tcp_rmem=4096 131072 16777216"; a key
// may also be written with slashes, as under /proc/sys.
func ParseAssignment(s string) (Assignment, error) {
	k, v, ok := strings.Cut(s, "=")
	k = strings.ReplaceAll(strings.TrimSpace(k), "/", ".")
	if !ok || k == "" || strings.TrimSpace(v) == "" {
		return Assignment{}, fmt.Errorf("--set %q: want KEY=VALUE, e.g. net.ipv4.tcp_rmem=\"4096 131072 16777216\"", s)
	}
	return Assignment{Key: k, Value: strings.TrimSpace(v)}, nil
}

// Step is one validated write: the bytes found and the value to write.
type Step struct {
	Key  string `json:"key"`
	From string `json:"from"`
	To   string `json:"to"`
	// Unchanged steps are skipped when applying.
	Unchanged bool `json:"unchanged,omitempty"`
	raw       []byte
}

// Tuner applies and reverts sysctl changes in one namespace, keeping a
// backup of the original values.
type Tuner struct {
	FS ProcSys
	// Netns is the namespace name ("" = host). It decides which keys are
	// refused and where the backup goes; Enter must run fn inside it.
	Netns string
	Enter func(fn func() error) error
	// BackupDir overrides the backup directory: /var/lib/wanlab for the
	// host (it must survive a reboot, like the settings a sysctl.conf
	// restores), /run/wanlab for a namespace (which a reboot removes).
	BackupDir string
	Now       func() time.Time
}

// ErrHostWide marks a key that cannot be changed inside a namespace.
var ErrHostWide = errors.New("host-wide key")

// ErrInvalid marks a set refused by validation: nothing was written.
var ErrInvalid = errors.New("refused, nothing written")

// ErrNoBackup is returned by Revert when nothing was applied.
var ErrNoBackup = errors.New("no backup to revert")

// BackupPath is the backup file of t's namespace.
func (t *Tuner) BackupPath() string {
	dir := t.BackupDir
	if dir == "" {
		dir = host.LibDir
		if t.Netns != "" {
			dir = host.RunDir
		}
	}
	name := "tune-backup.json"
	if t.Netns != "" {
		name = "tune-backup-netns-" + t.Netns + ".json"
	}
	return filepath.Join(dir, name)
}

func (t *Tuner) enter(fn func() error) error {
	if t.Enter == nil {
		return fn()
	}
	return t.Enter(fn)
}

func (t *Tuner) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Backup is the file that records the values found before the first
// write; stacked applies add only keys it does not have yet, so it always
// holds the oldest original.
type Backup struct {
	Netns   string        `json:"netns"`
	Kernel  string        `json:"kernel"`
	Created time.Time     `json:"created"`
	Entries []BackupEntry `json:"entries"`
}

// BackupEntry keeps a key's file content exactly as read.
type BackupEntry struct {
	Key string `json:"key"`
	Raw string `json:"raw"`
}

func (b *Backup) has(key string) bool {
	for _, e := range b.Entries {
		if e.Key == key {
			return true
		}
	}
	return false
}

// Validate checks every assignment before anything is written and
// returns the steps, or an error naming every bad one.
func (t *Tuner) Validate(set []Assignment) ([]Step, error) {
	var steps []Step
	err := t.enter(func() error {
		var err error
		steps, err = t.validate(set)
		return err
	})
	return steps, err
}

func (t *Tuner) validate(set []Assignment) ([]Step, error) {
	if len(set) == 0 {
		return nil, fmt.Errorf("%w: nothing to apply", ErrInvalid)
	}
	var errs []error
	var avail, allowed []string
	if v, err := t.FS.Read("net.ipv4.tcp_available_congestion_control"); err == nil {
		avail = strings.Fields(v)
	}
	if v, err := t.FS.Read("net.ipv4.tcp_allowed_congestion_control"); err == nil {
		allowed = strings.Fields(v)
	}
	seen := map[string]bool{}
	var steps []Step
	for _, a := range set {
		k, ok := LookupKey(a.Key)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown key (the tuner changes only: %s)", a.Key, knownKeyNames()))
			continue
		}
		if seen[a.Key] {
			errs = append(errs, fmt.Errorf("%s: given twice", a.Key))
			continue
		}
		seen[a.Key] = true
		if t.Netns != "" && !k.PerNetns {
			errs = append(errs, fmt.Errorf("%s: %w: Linux shares it between all network namespaces and does not let netns %s change it (read-only or absent there: writing it fails with EACCES or EINVAL); set it on the host, without --netns", a.Key, ErrHostWide, t.Netns))
			continue
		}
		v, err := checkValue(k, a.Value, avail)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// tcp_set_default_congestion_control (net/ipv4/tcp_cong.c) returns
		// EPERM outside init_net for algorithms not marked
		// TCP_CONG_NON_RESTRICTED, i.e. not in the allowed list.
		if k.Kind == KindCC && t.Netns != "" && allowed != nil && !slices.Contains(allowed, v) {
			errs = append(errs, fmt.Errorf("%s = %q: inside netns %s the default must be one of net.ipv4.tcp_allowed_congestion_control (%s), Linux refuses others with EPERM; on the host run: wanlab tune apply --set net.ipv4.tcp_allowed_congestion_control=%q",
				a.Key, v, t.Netns, strings.Join(allowed, " "), strings.Join(append(slices.Clone(allowed), v), " ")))
			continue
		}
		raw, err := t.FS.ReadRaw(a.Key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		steps = append(steps, Step{Key: a.Key, From: normalize(string(raw)), To: v, Unchanged: normalize(string(raw)) == v, raw: raw})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return steps, nil
}

// Result reports what Apply or Revert did.
type Result struct {
	Netns   string `json:"netns,omitempty"`
	DryRun  bool   `json:"dry_run,omitempty"`
	Steps   []Step `json:"steps"`
	Backup  string `json:"backup,omitempty"`
	Written int    `json:"written"`
}

// WriteText prints the result for people.
func (r Result) WriteText(w io.Writer, verb string) error {
	var b strings.Builder
	where := "host"
	if r.Netns != "" {
		where = "netns " + r.Netns
	}
	if r.DryRun {
		fmt.Fprintf(&b, "Dry run in %s: nothing written. Would %s:\n", where, verb)
	} else {
		fmt.Fprintf(&b, "%s in %s (%d written):\n", strings.ToUpper(verb[:1])+verb[1:], where, r.Written)
	}
	for _, s := range r.Steps {
		if s.Unchanged {
			fmt.Fprintf(&b, "  %s = %s (unchanged)\n", s.Key, s.To)
			continue
		}
		fmt.Fprintf(&b, "  %s: %s -> %s\n", s.Key, s.From, s.To)
	}
	if r.Backup != "" && !r.DryRun && verb == "apply" && r.Written > 0 {
		fmt.Fprintf(&b, "Previous values kept in %s; undo with: wanlab tune revert", r.Backup)
		if r.Netns != "" {
			fmt.Fprintf(&b, " --netns %s", r.Netns)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Apply validates set, records the current values in the backup before
// the first write, and writes the set in order; if a write fails, the
// keys already written get their previous bytes back and the backup is
// restored to what it was. With dryRun nothing is written.
func (t *Tuner) Apply(set []Assignment, dryRun bool) (Result, error) {
	res := Result{Netns: t.Netns, DryRun: dryRun, Backup: t.BackupPath()}
	err := t.enter(func() error {
		if !dryRun {
			unlock, err := lockBackup(t.BackupPath())
			if err != nil {
				return err
			}
			defer unlock()
		}
		// Validate under the lock: the values found are the ones saved.
		steps, err := t.validate(set)
		if err != nil {
			return err
		}
		res.Steps = steps
		if dryRun {
			return nil
		}
		return t.apply(steps, &res)
	})
	return res, err
}

func (t *Tuner) apply(steps []Step, res *Result) error {
	path := t.BackupPath()
	oldBackup, err := readBackupFile(path)
	hadBackup := err == nil
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	b := &Backup{}
	if hadBackup {
		if b, err = ParseBackup(oldBackup); err != nil {
			return fmt.Errorf("backup %s: %w (move it away or run wanlab tune revert)", path, err)
		}
	} else {
		rel, _ := t.FS.Read("kernel.osrelease")
		b = &Backup{Netns: t.Netns, Kernel: rel, Created: t.now().UTC()}
	}
	added := false
	for _, s := range steps {
		if !s.Unchanged && !b.has(s.Key) {
			b.Entries = append(b.Entries, BackupEntry{Key: s.Key, Raw: string(s.raw)})
			added = true
		}
	}
	if added {
		if err := writeBackup(path, b); err != nil {
			return err
		}
	}
	restoreBackup := func() error {
		if !added {
			return nil
		}
		if hadBackup {
			return writeFileAtomic(path, oldBackup)
		}
		return os.Remove(path)
	}
	for i, s := range steps {
		if s.Unchanged {
			continue
		}
		if err := t.FS.Write(s.Key, []byte(s.To+"\n")); err != nil {
			rb := t.rollback(steps[:i])
			if rb == nil {
				rb = restoreBackup()
			}
			if rb != nil {
				return fmt.Errorf("%w; rollback failed, previous values remain in %s: %w", err, path, rb)
			}
			return fmt.Errorf("%w (the %d key(s) written before it were restored)", err, res.Written)
		}
		res.Written++
	}
	return nil
}

// rollback writes back the bytes found before steps were applied, last
// first.
func (t *Tuner) rollback(steps []Step) error {
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Unchanged {
			continue
		}
		if err := t.FS.Write(s.Key, s.raw); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Revert writes back every value in the backup, checks that each file
// reads back byte for byte, and removes the backup. On failure the backup
// stays, so revert can be retried.
func (t *Tuner) Revert(dryRun bool) (Result, error) {
	res := Result{Netns: t.Netns, DryRun: dryRun, Backup: t.BackupPath()}
	err := t.enter(func() error {
		path := t.BackupPath()
		if !dryRun {
			unlock, err := lockBackup(path)
			if err != nil {
				return err
			}
			defer unlock()
		}
		data, err := readBackupFile(path)
		if os.IsNotExist(err) {
			return fmt.Errorf("%s: %w", path, ErrNoBackup)
		}
		if err != nil {
			return fmt.Errorf("backup %s: %w", path, err)
		}
		b, err := ParseBackup(data)
		if err != nil {
			return fmt.Errorf("backup %s: %w (nothing written)", path, err)
		}
		if b.Netns != t.Netns {
			return fmt.Errorf("backup %s was made for netns %q, not %q", path, b.Netns, t.Netns)
		}
		var errs []error
		for _, e := range b.Entries {
			cur, err := t.FS.ReadRaw(e.Key)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			st := Step{Key: e.Key, From: normalize(string(cur)), To: normalize(e.Raw), Unchanged: bytes.Equal(cur, []byte(e.Raw))}
			res.Steps = append(res.Steps, st)
			if dryRun || st.Unchanged {
				continue
			}
			if err := t.FS.Write(e.Key, []byte(e.Raw)); err != nil {
				errs = append(errs, err)
				continue
			}
			got, err := t.FS.ReadRaw(e.Key)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !bytes.Equal(got, []byte(e.Raw)) {
				errs = append(errs, fmt.Errorf("%s reads back %q after restoring %q", e.Key, got, e.Raw))
				continue
			}
			res.Written++
		}
		if len(errs) > 0 {
			return fmt.Errorf("revert from %s (backup kept): %w", path, errors.Join(errs...))
		}
		if dryRun {
			return nil
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove backup: %w", err)
		}
		return nil
	})
	return res, err
}

// maxBackupBytes bounds a backup file: a few dozen keys and their values.
const maxBackupBytes = 1 << 20

// readBackupFile reads the backup at path from a directory only root can
// write to (hostfile.CheckDir), a regular file of at most maxBackupBytes.
func readBackupFile(path string) ([]byte, error) {
	if _, err := os.Lstat(path); err != nil {
		return nil, err
	}
	if err := hostfile.CheckDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return hostfile.ReadInput(path, maxBackupBytes)
}

// ParseBackup decodes and validates a backup file before any of it is
// used: every key must be one the tuner writes (Keys, not read-only),
// named once, its raw value short and free of NUL, and the namespace a
// valid name. A tampered file is refused naming the field.
func ParseBackup(data []byte) (*Backup, error) {
	var b Backup
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	if err := host.CheckNetnsName(b.Netns); b.Netns != "" && err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	seen := map[string]bool{}
	for i, e := range b.Entries {
		k, ok := LookupKey(e.Key)
		switch {
		case !ok || k.ReadOnly:
			return nil, fmt.Errorf("entries[%d].key %q: not a key the tuner writes", i, e.Key)
		case seen[e.Key]:
			return nil, fmt.Errorf("entries[%d].key %q: listed twice", i, e.Key)
		case len(e.Raw) > 4096 || strings.ContainsRune(e.Raw, 0):
			return nil, fmt.Errorf("entries[%d].raw of %s: not a sysctl value", i, e.Key)
		}
		seen[e.Key] = true
	}
	return &b, nil
}

func writeBackup(path string, b *Backup) error { return hostfile.WriteJSON(path, b, "backup") }

// writeFileAtomic writes to a temporary file, syncs it and renames it over
// path, so a crash leaves either the old or the new backup, never half.
func writeFileAtomic(path string, data []byte) error {
	if err := hostfile.WriteAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	return nil
}
