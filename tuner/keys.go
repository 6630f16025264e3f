package tuner

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kind says how a key's value is written and checked.
type Kind int

// Value kinds.
const (
	KindBytes  Kind = iota // one integer, bytes
	KindTriple             // "min default max", bytes
	KindPages              // "low pressure high", pages of memory
	KindBool               // 0 or 1
	KindInt                // an integer within [Min, Max]
	KindCC                 // a congestion control algorithm name
	KindName               // a kernel object name (qdisc)
	KindList               // read-only, space-separated names
	KindCCList             // space-separated congestion control names
)

// Key describes one sysctl the tuner knows.
type Key struct {
	Name string
	Kind Kind
	// PerNetns is false for host-wide keys: absent or read-only inside a
	// network namespace (net.core.* buffer limits are mirrored read-only
	// there since sysctl_core_net_init in net/core/sysctl_net_core.c clears
	// their write bits; tcp_mem, default_qdisc and netdev_max_backlog are
	// not registered there at all).
	PerNetns bool
	ReadOnly bool
	// Min and Max bound each integer the kernel accepts (its proc handler's
	// extra1/extra2).
	Min, Max int64
	Meaning  string
}

// Kernel limits mirrored from the proc handlers: proc_dointvec_minmax with
// extra1 = SYSCTL_ONE for tcp_rmem/tcp_wmem (net/ipv4/sysctl_net_ipv4.c),
// min_rcvbuf/min_sndbuf for net.core.*mem_* (SOCK_MIN_RCVBUF =
// 2048 + SKB_DATA_ALIGN(sizeof(struct sk_buff)) = 2304 on x86_64,
// SOCK_MIN_SNDBUF twice that, include/net/sock.h).
const (
	minRcvbuf = 2304
	minSndbuf = 2 * minRcvbuf
	intMax    = math.MaxInt32
)

// Keys is every sysctl the tuner shows, in display order.
var Keys = []Key{
	{Name: "net.ipv4.tcp_rmem", Kind: KindTriple, PerNetns: true, Min: 1, Max: intMax,
		Meaning: "TCP receive buffer min/default/max; autotuning grows a socket's buffer up to max, and the receive window is a fraction of the buffer"},
	{Name: "net.ipv4.tcp_wmem", Kind: KindTriple, PerNetns: true, Min: 1, Max: intMax,
		Meaning: "TCP send buffer min/default/max; bounds the data a sender keeps in flight plus unsent"},
	{Name: "net.ipv4.tcp_mem", Kind: KindPages, Min: 0, Max: math.MaxInt64,
		Meaning: "memory for all TCP sockets together, in pages: below low no pressure; above pressure buffers are trimmed; above high allocations fail"},
	{Name: "net.core.rmem_max", Kind: KindBytes, Min: minRcvbuf, Max: intMax,
		Meaning: "largest SO_RCVBUF an application may set (the kernel stores twice it); does not cap autotuning"},
	{Name: "net.core.wmem_max", Kind: KindBytes, Min: minSndbuf, Max: intMax,
		Meaning: "largest SO_SNDBUF an application may set (the kernel stores twice it); does not cap autotuning"},
	{Name: "net.core.rmem_default", Kind: KindBytes, Min: minRcvbuf, Max: intMax,
		Meaning: "initial receive buffer of non-TCP sockets (TCP uses tcp_rmem default)"},
	{Name: "net.core.wmem_default", Kind: KindBytes, Min: minSndbuf, Max: intMax,
		Meaning: "initial send buffer of non-TCP sockets (TCP uses tcp_wmem default)"},
	{Name: "net.ipv4.tcp_moderate_rcvbuf", Kind: KindBool, PerNetns: true, Min: 0, Max: 1,
		Meaning: "receive buffer autotuning; when 0 a socket keeps tcp_rmem default for its whole life"},
	{Name: "net.ipv4.tcp_window_scaling", Kind: KindBool, PerNetns: true, Min: 0, Max: 1,
		Meaning: "RFC 7323 window scaling; when 0 no window exceeds 64 KiB"},
	{Name: "net.ipv4.tcp_adv_win_scale", Kind: KindInt, PerNetns: true, Min: -31, Max: 31,
		Meaning: "before Linux 6.6: share of the receive buffer advertised as window (space - space>>scale); ignored since 6.6"},
	{Name: "net.ipv4.tcp_congestion_control", Kind: KindCC, PerNetns: true,
		Meaning: "congestion control for new sockets"},
	{Name: "net.ipv4.tcp_available_congestion_control", Kind: KindList, PerNetns: true, ReadOnly: true,
		Meaning: "congestion control algorithms loaded in the kernel"},
	{Name: "net.ipv4.tcp_allowed_congestion_control", Kind: KindCCList,
		Meaning: "algorithms unprivileged sockets may pick with TCP_CONGESTION, and the only ones a network namespace may make its default"},
	{Name: "net.core.default_qdisc", Kind: KindName,
		Meaning: "qdisc attached to new interfaces (fq paces per flow; BBR paces itself since Linux 4.13)"},
	{Name: "net.ipv4.tcp_notsent_lowat", Kind: KindInt, PerNetns: true, Min: 0, Max: math.MaxUint32,
		Meaning: "unsent bytes a socket may queue beyond what is in flight before it stops being writable; 4294967295 = no limit"},
	{Name: "net.ipv4.tcp_slow_start_after_idle", Kind: KindBool, PerNetns: true, Min: 0, Max: 1,
		Meaning: "restart from the initial window after an idle period of one RTO; hurts bursty long-RTT transfers"},
	{Name: "net.ipv4.tcp_mtu_probing", Kind: KindInt, PerNetns: true, Min: 0, Max: 2,
		Meaning: "packetization-layer path MTU discovery: 0 off, 1 after an ICMP black hole is detected, 2 always"},
	{Name: "net.core.netdev_max_backlog", Kind: KindInt, Min: 1, Max: intMax,
		Meaning: "packets queued per CPU between the driver and the stack before drops"},
}

// LookupKey returns the description of a known key.
func LookupKey(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

func knownKeyNames() string {
	var names []string
	for _, k := range Keys {
		if !k.ReadOnly {
			names = append(names, k.Name)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Triple is a min/default/max sysctl such as tcp_rmem, in bytes (or pages
// for tcp_mem).
type Triple struct {
	Min, Default, Max int64
}

func (t Triple) String() string {
	return fmt.Sprintf("%d %d %d", t.Min, t.Default, t.Max)
}

// ParseTriple parses "4096 131072 6291456" (any whitespace).
func ParseTriple(s string) (Triple, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return Triple{}, fmt.Errorf("%q: want three integers \"min default max\"", s)
	}
	var v [3]int64
	for i, x := range f {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return Triple{}, fmt.Errorf("%q: %q is not an integer", s, x)
		}
		v[i] = n
	}
	return Triple{v[0], v[1], v[2]}, nil
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)

// checkValue validates value for k, given the algorithms available (for
// tcp_congestion_control), and returns it in the form to write.
func checkValue(k Key, value string, availableCC []string) (string, error) {
	if k.ReadOnly {
		return "", fmt.Errorf("%s is read-only", k.Name)
	}
	v := normalize(value)
	inRange := func(n int64) error {
		if n < k.Min || n > k.Max {
			return fmt.Errorf("%s = %q: %d is outside the kernel's range %d..%d", k.Name, value, n, k.Min, k.Max)
		}
		return nil
	}
	switch k.Kind {
	case KindBytes, KindInt, KindBool:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", fmt.Errorf("%s = %q: not an integer", k.Name, value)
		}
		if err := inRange(n); err != nil {
			return "", err
		}
		return strconv.FormatInt(n, 10), nil
	case KindTriple, KindPages:
		t, err := ParseTriple(v)
		if err != nil {
			return "", fmt.Errorf("%s = %w", k.Name, err)
		}
		for _, n := range []int64{t.Min, t.Default, t.Max} {
			if err := inRange(n); err != nil {
				return "", err
			}
		}
		what := [3]string{"min", "default", "max"}
		if k.Kind == KindPages {
			what = [3]string{"low", "pressure", "high"}
		}
		if t.Min > t.Default {
			return "", fmt.Errorf("%s = %q: %s %d is larger than %s %d", k.Name, value, what[0], t.Min, what[1], t.Default)
		}
		if t.Default > t.Max {
			return "", fmt.Errorf("%s = %q: %s %d is larger than %s %d", k.Name, value, what[1], t.Default, what[2], t.Max)
		}
		return t.String(), nil
	case KindCC:
		for _, a := range availableCC {
			if a == v {
				return v, nil
			}
		}
		return "", fmt.Errorf("%s = %q: not available in this kernel (available: %s)", k.Name, value, strings.Join(availableCC, " "))
	case KindCCList:
		names := strings.Fields(v)
		if len(names) == 0 {
			return "", fmt.Errorf("%s = %q: want one or more algorithm names", k.Name, value)
		}
		for _, n := range names {
			if !slices.Contains(availableCC, n) {
				return "", fmt.Errorf("%s = %q: %s is not available in this kernel (available: %s)", k.Name, value, n, strings.Join(availableCC, " "))
			}
		}
		return strings.Join(names, " "), nil
	case KindName:
		if !nameRE.MatchString(v) {
			return "", fmt.Errorf("%s = %q: not a kernel object name", k.Name, value)
		}
		return v, nil
	}
	return "", fmt.Errorf("%s cannot be set", k.Name)
}
