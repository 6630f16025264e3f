// Package units holds the quantities wanlab passes around (rates, sizes,
// times, percentages) and parses them exactly as iproute2's tc does, so a
// value typed for tc means the same thing here.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is a data rate in bits per second.
type Rate uint64

// Common rates.
const (
	BitPerSecond Rate = 1
	Kbit              = 1000 * BitPerSecond
	Mbit              = 1000 * Kbit
	Gbit              = 1000 * Mbit
)

// BytesPerSecond returns the rate in bytes per second.
func (r Rate) BytesPerSecond() float64 { return float64(r) / 8 }

// TxTime returns how long size bytes take to serialize at r. A zero rate
// means unlimited and returns 0.
func (r Rate) TxTime(size Size) time.Duration {
	if r == 0 {
		return 0
	}
	// size*8e9/r ns without overflow for any realistic size.
	return time.Duration(float64(size) * 8e9 / float64(r))
}

// String prints the rate in tc's lower-case bit form, using the largest SI
// prefix that divides it exactly, so that ParseRate(r.String()) == r.
func (r Rate) String() string {
	return exact(uint64(r), []prefix{{1e12, "tbit"}, {1e9, "gbit"}, {1e6, "mbit"}, {1e3, "kbit"}}, "bit")
}

// Human prints the rate rounded to three significant digits (e.g. "43.1Mbit/s").
func (r Rate) Human() string {
	if h := rounded(float64(r), []prefix{{1e12, "Tbit/s"}, {1e9, "Gbit/s"}, {1e6, "Mbit/s"}, {1e3, "Kbit/s"}}); h != "" {
		return h
	}
	return Sig(float64(r)) + "bit/s"
}

// prefix is a unit prefix: its multiple and the name printed after the
// number.
type prefix struct {
	div  uint64
	name string
}

// exact prints v in the first (largest) of prefixes that divides it, or
// with the bare unit: the form tc prints and parses back to v.
func exact(v uint64, prefixes []prefix, bare string) string {
	if v != 0 {
		for _, p := range prefixes {
			if v%p.div == 0 {
				return strconv.FormatUint(v/p.div, 10) + p.name
			}
		}
	}
	return strconv.FormatUint(v, 10) + bare
}

// rounded prints v to three significant digits in the first (largest) of
// prefixes that v reaches, or returns "" when it is below them all: the
// bare forms of rates and sizes differ (Size prints whole bytes).
func rounded(v float64, prefixes []prefix) string {
	for _, p := range prefixes {
		if d := float64(p.div); v >= d {
			return Sig(v/d) + p.name
		}
	}
	return ""
}

// Size is an amount of data in bytes.
type Size uint64

// Common sizes (binary, as tc uses them).
const (
	Byte Size = 1
	KiB       = 1024 * Byte
	MiB       = 1024 * KiB
	GiB       = 1024 * MiB
)

// String prints the size in tc's form using the largest binary prefix that
// divides it exactly ("50kb", "1mb", "1514b"), so ParseSize round-trips.
func (s Size) String() string {
	return exact(uint64(s), []prefix{{1 << 30, "gb"}, {1 << 20, "mb"}, {1 << 10, "kb"}}, "b")
}

// Human prints the size with a binary prefix to three significant digits.
func (s Size) Human() string {
	if h := rounded(float64(s), []prefix{{1 << 30, " GiB"}, {1 << 20, " MiB"}, {1 << 10, " KiB"}}); h != "" {
		return h
	}
	return strconv.FormatUint(uint64(s), 10) + " B"
}

// rateSuffixes mirrors iproute2 lib/utils_math.c; matching is
// case-insensitive there (strcasecmp), so "mbps" means megabytes per second.
var rateSuffixes = []struct {
	name  string
	scale float64
}{
	{"bit", 1}, {"kibit", 1024}, {"kbit", 1000}, {"mibit", 1024 * 1024}, {"mbit", 1e6},
	{"gibit", 1024 * 1024 * 1024}, {"gbit", 1e9}, {"tibit", 1024 * 1024 * 1024 * 1024}, {"tbit", 1e12},
	{"bps", 8}, {"kibps", 8 * 1024}, {"kbps", 8000}, {"mibps", 8 * 1024 * 1024}, {"mbps", 8e6},
	{"gibps", 8 * 1024 * 1024 * 1024}, {"gbps", 8e9}, {"tibps", 8 * 1024 * 1024 * 1024 * 1024}, {"tbps", 8e12},
}

// splitNumber splits "12.5mbit" into 12.5 and "mbit" like C's strtod does.
func splitNumber(s string) (float64, string, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == '+' || s[i] == '-' ||
		((s[i] == 'e' || s[i] == 'E') && i > 0 && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-' || s[i+1] == '+'))) {
		i++
	}
	if i == 0 {
		return 0, "", fmt.Errorf("%q is not a number", s)
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, "", fmt.Errorf("%q is not a number", s)
	}
	if v < 0 {
		return 0, "", fmt.Errorf("%q is negative", s)
	}
	return v, s[i:], nil
}

// ParseRate parses a rate as tc does (get_rate64): a number with an optional
// suffix bit, kbit, mbit, gbit, tbit, kibit..tibit, or Bps, KBps..TBps,
// KiBps..TiBps (bytes per second). A bare number is bits per second.
func ParseRate(s string) (Rate, error) {
	v, suf, err := splitNumber(s)
	if err != nil {
		return 0, fmt.Errorf("rate %w", err)
	}
	if suf != "" {
		found := false
		for _, r := range rateSuffixes {
			if strings.EqualFold(suf, r.name) {
				v *= r.scale
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("rate %q: unknown unit %q (use bit, kbit, mbit, gbit or Bps, KBps, MBps)", s, suf)
		}
	}
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("rate %q is too large", s)
	}
	return Rate(math.Round(v)), nil
}

// ParseSize parses a size as tc does (get_size64): a number with an optional
// suffix b, k/kb, m/mb, g/gb (powers of 1024) or kbit, mbit, gbit. A bare
// number is bytes.
func ParseSize(s string) (Size, error) {
	v, suf, err := splitNumber(s)
	if err != nil {
		return 0, fmt.Errorf("size %w", err)
	}
	switch strings.ToLower(suf) {
	case "", "b":
	case "k", "kb":
		v *= 1024
	case "m", "mb":
		v *= 1024 * 1024
	case "g", "gb":
		v *= 1024 * 1024 * 1024
	case "kbit":
		v *= 1024 / 8
	case "mbit":
		v *= 1024 * 1024 / 8
	case "gbit":
		v *= 1024 * 1024 * 1024 / 8
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (use b, kb, mb, gb)", s, suf)
	}
	// tc stores the double in an integer and compares it with floor():
	// fractions are truncated, not refused.
	v = math.Floor(v)
	if v > math.MaxUint32 {
		return 0, fmt.Errorf("size %q is larger than 4 GiB", s)
	}
	return Size(v), nil
}

// ParseTime parses a time as tc's get_time64 does (netem): a number with an
// optional suffix s/sec/secs, ms/msec/msecs, us/usec/usecs, ns/nsec/nsecs.
// A bare number is nanoseconds there; tbf's get_time uses microseconds, so
// the bare unit is a parameter.
func ParseTime(s string, bare time.Duration) (time.Duration, error) {
	v, suf, err := splitNumber(s)
	if err != nil {
		return 0, fmt.Errorf("time %w", err)
	}
	switch strings.ToLower(suf) {
	case "":
		v *= float64(bare)
	case "s", "sec", "secs":
		v *= 1e9
	case "ms", "msec", "msecs":
		v *= 1e6
	case "us", "usec", "usecs":
		v *= 1e3
	case "ns", "nsec", "nsecs":
	default:
		return 0, fmt.Errorf("time %q: unknown unit %q (use s, ms, us, ns)", s, suf)
	}
	if v >= math.MaxInt64 { // float64(MaxInt64) is 2^63, which would wrap
		return 0, fmt.Errorf("time %q is too large", s)
	}
	return time.Duration(v), nil
}

// Percent is a probability in percent, 0 to 100.
type Percent float64

// ParsePercent parses "1%", "0.5%" or a bare number as a percentage, as
// iproute2's get_percent does, and checks it lies in 0-100.
func ParsePercent(s string) (Percent, error) {
	t := strings.TrimSuffix(s, "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	if v < 0 || v > 100 {
		return 0, fmt.Errorf("%s: must be 0-100%%", s)
	}
	return Percent(v), nil
}

// Prob returns the percentage as a probability in [0, 1].
func (p Percent) Prob() float64 { return float64(p) / 100 }

// String prints the percentage with the fewest digits that round-trip.
func (p Percent) String() string { return strconv.FormatFloat(float64(p), 'g', -1, 64) + "%" }

// FormatDuration prints a duration in tc's style with the largest unit that
// keeps it exact: "100ms", "1.5s", "250us", "17ns".
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0ms"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d%time.Microsecond == 0:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "us"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
