package tuner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// KernelVersion is the running kernel's major.minor, read from
// kernel/osrelease below the same root as the sysctls.
type KernelVersion struct {
	Major   int    `json:"major"`
	Minor   int    `json:"minor"`
	Release string `json:"release"`
}

// AtLeast reports whether the version is major.minor or newer.
func (v KernelVersion) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// ParseKernelVersion parses "6.18.44-fc-v669" or "5.4.0-149-generic".
func ParseKernelVersion(release string) (KernelVersion, error) {
	r := strings.TrimSpace(release)
	parts := strings.SplitN(r, ".", 3)
	if len(parts) < 2 {
		return KernelVersion{}, fmt.Errorf("kernel release %q: want major.minor", r)
	}
	major, err1 := strconv.Atoi(parts[0])
	minorDigits := parts[1]
	if i := strings.IndexFunc(minorDigits, func(c rune) bool { return c < '0' || c > '9' }); i >= 0 {
		minorDigits = minorDigits[:i]
	}
	minor, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil {
		return KernelVersion{}, fmt.Errorf("kernel release %q: want major.minor", r)
	}
	return KernelVersion{Major: major, Minor: minor, Release: r}, nil
}

// Setting is one key as found, with what it means and anything a reader
// should know about it on this kernel or in this namespace.
type Setting struct {
	Key     string `json:"key"`
	Value   string `json:"value,omitempty"`
	Present bool   `json:"present"`
	Note    string `json:"note,omitempty"`
	Meaning string `json:"meaning"`
}

// Snapshot is the state of every known key in one namespace, with the
// values the throughput model needs already parsed.
type Snapshot struct {
	Netns    string        `json:"netns,omitempty"`
	Kernel   KernelVersion `json:"kernel"`
	Settings []Setting     `json:"settings"`

	TCPRmem       Triple   `json:"-"`
	TCPWmem       Triple   `json:"-"`
	TCPMem        *Triple  `json:"-"` // nil inside a namespace
	RmemMax       int64    `json:"-"`
	WmemMax       int64    `json:"-"`
	Moderate      bool     `json:"-"`
	WindowScaling bool     `json:"-"`
	AdvWinScale   int      `json:"-"`
	CC            string   `json:"-"`
	AvailableCC   []string `json:"-"`
}

// Value returns a key's normalized value ("" when absent).
func (s *Snapshot) Value(key string) string {
	for _, st := range s.Settings {
		if st.Key == key {
			return st.Value
		}
	}
	return ""
}

// ReadSnapshot reads every known key below p. netns names the namespace
// the caller runs in ("" for the host); it only changes the notes.
func ReadSnapshot(p ProcSys, netns string) (*Snapshot, error) {
	rel, err := p.Read("kernel.osrelease")
	if err != nil {
		return nil, err
	}
	kv, err := ParseKernelVersion(rel)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Netns: netns, Kernel: kv}
	for _, k := range Keys {
		st := Setting{Key: k.Name, Meaning: k.Meaning}
		v, err := p.Read(k.Name)
		switch {
		case err == nil:
			st.Value, st.Present = v, true
		case isNotExist(err):
		default:
			return nil, err
		}
		switch {
		case !st.Present && netns != "" && !k.PerNetns:
			st.Note = "host-wide; not visible inside a network namespace"
		case !st.Present:
			st.Note = "not present on this kernel"
		case netns != "" && !k.PerNetns:
			st.Note = "host-wide; read-only inside a network namespace"
		}
		if k.Name == "net.ipv4.tcp_adv_win_scale" && kv.AtLeast(6, 6) {
			st.Note = "obsolete since Linux 6.6: the window is sized from the measured payload/truesize ratio instead"
		}
		s.Settings = append(s.Settings, st)
	}
	return s, s.parse()
}

// parse fills the typed fields from the settings.
func (s *Snapshot) parse() error {
	var errs []error
	triple := func(key string) Triple {
		t, err := ParseTriple(s.Value(key))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		return t
	}
	integer := func(key string, def int64) int64 {
		v := s.Value(key)
		if v == "" {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s = %q: not an integer", key, v))
		}
		return n
	}
	s.TCPRmem = triple("net.ipv4.tcp_rmem")
	s.TCPWmem = triple("net.ipv4.tcp_wmem")
	if s.Value("net.ipv4.tcp_mem") != "" {
		t := triple("net.ipv4.tcp_mem")
		s.TCPMem = &t
	}
	s.RmemMax = integer("net.core.rmem_max", 0)
	s.WmemMax = integer("net.core.wmem_max", 0)
	s.Moderate = integer("net.ipv4.tcp_moderate_rcvbuf", 1) != 0
	s.WindowScaling = integer("net.ipv4.tcp_window_scaling", 1) != 0
	s.AdvWinScale = int(integer("net.ipv4.tcp_adv_win_scale", 1))
	s.CC = s.Value("net.ipv4.tcp_congestion_control")
	s.AvailableCC = strings.Fields(s.Value("net.ipv4.tcp_available_congestion_control"))
	return errors.Join(errs...)
}
