package units

import (
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	cases := map[string]Rate{
		"50mbit": 50 * Mbit, "1gbit": Gbit, "100kbit": 100 * Kbit, "64kbit": 64000,
		"1000": 1000, "1Mbit": Mbit, "1mibit": 1 << 20, "1kibit": 1024,
		"1MBps": 8 * Mbit, "1mbps": 8 * Mbit, "1Bps": 8, "1KiBps": 8192, "2.5gbit": 2500 * Mbit,
		"10tbit": 10e12,
	}
	for in, want := range cases {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "mbit", "-1mbit", "10mbits", "1e400bit", "NaN"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	cases := map[string]Size{
		"50kb": 51200, "500kb": 512000, "1mb": 1 << 20, "64k": 65536, "1514": 1514,
		"1514b": 1514, "1mbit": 131072, "1g": 1 << 30, "1.5": 1, "1.5kb": 1536,
	}
	for in, want := range cases {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "kb", "5gb", "-1", "1kib"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestParseTime(t *testing.T) {
	cases := map[string]time.Duration{
		"100ms": 100 * time.Millisecond, "1s": time.Second, "1.5sec": 1500 * time.Millisecond,
		"250us": 250 * time.Microsecond, "10usecs": 10 * time.Microsecond, "5ns": 5, "7": 7,
		"10MS": 10 * time.Millisecond,
	}
	for in, want := range cases {
		got, err := ParseTime(in, time.Nanosecond)
		if err != nil || got != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got, _ := ParseTime("7", time.Microsecond); got != 7*time.Microsecond {
		t.Errorf("bare tbf time = %v", got)
	}
	for _, bad := range []string{"", "ms", "-1ms", "10m", "1h", "9223372036854775808ns"} {
		if _, err := ParseTime(bad, time.Nanosecond); err == nil {
			t.Errorf("ParseTime(%q) accepted", bad)
		}
	}
}

func TestParsePercent(t *testing.T) {
	if p, err := ParsePercent("0.5%"); err != nil || p != 0.5 {
		t.Errorf("0.5%% = %v %v", p, err)
	}
	if _, err := ParsePercent("120%"); err == nil || err.Error() != "120%: must be 0-100%" {
		t.Errorf("120%% error = %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, r := range []Rate{1, 999, 64000, 50 * Mbit, 1500 * Mbit, 3 * Gbit, 1 << 20} {
		back, err := ParseRate(r.String())
		if err != nil || back != r {
			t.Errorf("rate %d -> %q -> %d %v", r, r.String(), back, err)
		}
	}
	for _, s := range []Size{0, 1, 1514, 51200, 1 << 20, 3 << 30, 1000} {
		back, err := ParseSize(s.String())
		if err != nil || back != s {
			t.Errorf("size %d -> %q -> %d %v", s, s.String(), back, err)
		}
	}
	for _, d := range []time.Duration{0, 1, 999, time.Microsecond * 3, 100 * time.Millisecond, 2 * time.Second} {
		back, err := ParseTime(FormatDuration(d), time.Nanosecond)
		if err != nil || back != d {
			t.Errorf("time %d -> %q -> %d %v", d, FormatDuration(d), back, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"50mbit", "1.5e3kbit", "50kb", "100ms", "1%", "", "e", "1e", ".", "1e999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := ParseRate(s); err == nil {
			if back, err := ParseRate(r.String()); err != nil || back != r {
				t.Fatalf("rate %q -> %d -> %q does not round-trip", s, r, r.String())
			}
		}
		if z, err := ParseSize(s); err == nil {
			if back, err := ParseSize(z.String()); err != nil || back != z {
				t.Fatalf("size %q does not round-trip", s)
			}
		}
		if d, err := ParseTime(s, time.Nanosecond); err == nil && d >= 0 {
			if back, err := ParseTime(FormatDuration(d), time.Nanosecond); err != nil || back != d {
				t.Fatalf("time %q -> %v does not round-trip", s, d)
			}
		}
		_, _ = ParsePercent(s)
	})
}
