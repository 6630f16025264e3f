package analyzer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/units"
)

// mbFmt and szFmt are mb and sz as written with fmt, the reference of
// appendMB and appendSize.
func mbFmt(bytesPerSec float64) string {
	return fmt.Sprintf("%s (%s MB/s)", units.Rate(bytesPerSec*8).Human(), units.Sig(bytesPerSec/1e6))
}

func szFmt(b float64) string { return units.Size(b).Human() }

// oddFloats are values where number formatting tends to go wrong.
var oddFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 0.05, 0.0005, 0.00049999, 9.995, 9.9949999,
	999.5, 999.4999, 1e-7, 1e-6, 9.99999e-7, 1e21, 1e20, 1e22, 123456789.123, 1 << 53, 1<<53 + 2, 1 << 63,
	-1 << 63, 1 << 64, math.MaxUint64, math.MaxFloat64, math.SmallestNonzeroFloat64, 2.2250738585072014e-308,
	math.Inf(1), math.Inf(-1), math.NaN(), 1023.9, 1024, 1048575.5, 1<<30 - 1, 1 << 40, 999, 1000, 999999.9,
	1e12, 1e15, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 1448, 64256}

// randFloat draws from several magnitudes, integers and round decimals.
func randFloat(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return oddFloats[r.IntN(len(oddFloats))]
	case 1:
		return float64(r.Int64N(1 << 40))
	case 2:
		return float64(r.Int64N(1e6)) / math.Pow10(r.IntN(7))
	case 3:
		return -float64(r.Int64N(1e9)) / math.Pow10(r.IntN(5))
	case 4:
		return math.Float64frombits(r.Uint64()) // anything, NaN and subnormals included
	case 5:
		return r.Float64() * math.Pow10(r.IntN(40)-20)
	case 6:
		return float64(r.Int64N(1<<53)) * math.Pow(2, float64(r.IntN(20)-10))
	}
	return r.NormFloat64() * 1e4
}

func TestAppendRateAndSizeMatchUnits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		f := randFloat(r)
		if got, want := string(appendMB(nil, f)), mbFmt(f); got != want {
			t.Fatalf("mb(%v) = %q, want %q", f, got, want)
		}
		if got, want := string(appendSize(nil, units.Size(f))), szFmt(f); got != want {
			t.Fatalf("sz(%v) = %q, want %q", f, got, want)
		}
		u := r.Uint64() >> r.IntN(64)
		if got, want := string(appendRate(nil, units.Rate(u))), units.Rate(u).Human(); got != want {
			t.Fatalf("Rate(%d) = %q, want %q", u, got, want)
		}
		if got, want := string(appendSize(nil, units.Size(u))), units.Size(u).Human(); got != want {
			t.Fatalf("Size(%d) = %q, want %q", u, got, want)
		}
	}
}

func TestSprintfMatchesFmt(t *testing.T) {
	addrs := []netip.Addr{{}, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1"),
		netip.MustParseAddr("::ffff:10.1.2.3"), netip.MustParseAddr("fe80::1%eth0")}
	for _, a := range addrs {
		if got, want := sprintf("on %v (%s)", aa(a), aa(a)), fmt.Sprintf("on %v (%s)", a, a); got != want {
			t.Errorf("address %q: got %q, want %q", a, got, want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100000; i++ {
		f, n := randFloat(r), r.Int64()>>r.IntN(64)
		if r.IntN(2) == 0 {
			n = -n
		}
		prec := r.IntN(6)
		format := fmt.Sprintf("a %%.%df b %%.%dg %%%% %%d %%s", prec, prec)
		got := sprintf(format, af(f), af(f), ai(n), as("x"))
		// %.Ng is written without an exponent: units.AppendSig's digits.
		want := fmt.Sprintf(fmt.Sprintf("a %%.%df b %%s %%%% %%d %%s", prec), f, units.AppendSig(nil, f, max(prec, 1)), n, "x")
		if got != want {
			t.Fatalf("%q of %v, %d: got %q, want %q", format, f, n, got, want)
		}
	}
	// Outside the subset sprintf hands over to fmt, which says what is wrong.
	for _, c := range []struct {
		format string
		args   []farg
		boxed  []any
	}{
		{"%d", []farg{af(1.5)}, []any{1.5}},
		{"%s and %s", []farg{as("a")}, []any{"a"}},
		{"%s", []farg{as("a"), ai(2)}, []any{"a", int64(2)}},
		{"%5.1f|%x|%", []farg{af(2), ai(255)}, []any{2.0, int64(255)}},
		{"%.f %.", []farg{af(2)}, []any{2.0}},
		{"%s", []farg{amb(1e6)}, []any{mbFmt(1e6)}},
		{"%s", []farg{asz(1e6)}, []any{szFmt(1e6)}},
	} {
		if got, want := sprintf(c.format, c.args...), fmt.Sprintf(c.format, c.boxed...); got != want {
			t.Errorf("%q: got %q, want %q", c.format, got, want)
		}
	}
}

// TestDiagnosisSentences diagnoses every committed capture, the
// synthetic scenarios, many short connections, and random directions that
// reach every limit, and checks that each sentence was written by the
// typed formatter: no verb it handed to fmt came out as fmt's error mark.
// (The wording itself is the golden files'; the formatter is checked
// against fmt by TestSprintfMatchesFmt and FuzzSprintf.)
func TestDiagnosisSentences(t *testing.T) {
	check := func(d, peer *Direction, c *Connection) string {
		dg := diagnoseDirection("client->server", d, peer, c, DefaultWindowRatio)
		for _, line := range append(append([]string{}, dg.Evidence...), dg.Advice...) {
			if line == "" || strings.Contains(line, "%!") {
				t.Fatalf("direction %+v: sentence %q", d.DirectionStats, line)
			}
		}
		return dg.Limit
	}
	for _, c := range corpusConnections(t, true, 200) {
		for i, d := range c.Directions {
			if d != nil && d.UniqueBytes > 0 {
				check(d, c.Directions[1-i], c)
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	limits := map[string]int{}
	for i := 0; i < 100000; i++ {
		d, peer := randDirection(r), randDirection(r)
		limits[check(d, peer, nil)]++
	}
	for _, l := range []string{LimitReceiveWindow, LimitSendBuffer, LimitLoss, LimitDelayedAck, LimitApplication,
		LimitBandwidth, LimitCongestion, LimitSlowStart, LimitUnknown} {
		if limits[l] == 0 {
			t.Errorf("no random direction was limited by %s: %v", l, limits)
		}
	}
}

// randDirection draws counters loosely related as the analysis makes them,
// so that every limit and every optional sentence comes up.
func randDirection(r *rand.Rand) *Direction {
	small := func(n int) int {
		if r.IntN(3) == 0 {
			return 0
		}
		return r.IntN(n)
	}
	ms := func(max float64) float64 {
		switch r.IntN(5) {
		case 0:
			return 0
		case 1:
			return math.Round(r.Float64()*max*100) / 100
		}
		return r.Float64() * max
	}
	d := &Direction{
		From: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(256))}), 80),
		To:   netip.AddrPortFrom(netip.MustParseAddr("fd00::2"), 40000),
	}
	s := &d.DirectionStats
	s.DataPackets = small(20000)
	s.Packets = s.DataPackets + small(20000)
	s.MSS = []int{0, 536, 1460, 8960}[r.IntN(4)]
	s.MaxSegmentBytes = []int{0, 1448, 1400, 64000}[r.IntN(4)]
	s.UniqueBytes = int64(s.DataPackets) * int64(small(1448))
	if r.IntN(4) == 0 {
		s.UniqueBytes = int64(small(1 << 34))
	}
	s.ResentPackets, s.GapFills = small(s.DataPackets/10+2), small(20)
	s.RetransmittedPackets, s.FastRetransmissions, s.SpuriousRetransmissions = small(100), small(50), small(5)
	s.OutOfOrderPackets, s.TripleDupAcks, s.ZeroWindows, s.ZeroWindowProbes = small(300), small(30), small(30), small(10)
	s.WindowFull = small(s.DataPackets + 1)
	if s.DataPackets+s.GapFills > 0 {
		s.LossRate = float64(s.ResentPackets+s.GapFills) / float64(s.DataPackets+s.GapFills)
	}
	s.WindowScaleKnown = r.IntN(5) > 0
	s.CapturedNear = []string{"sender", "receiver", "", "sender"}[r.IntN(4)]
	s.RTTSamples, s.TSRTTSamples, s.EchoRTTSamples = small(100), small(100), small(100)
	s.PathRTTMs = ms(300)
	s.PathRTTSource = []string{"karn", "handshake", "timestamps", "", "other"}[r.IntN(5)]
	s.RTTP50Ms = s.PathRTTMs * (1 + 3*r.Float64())
	s.TSRTTMinMs, s.TSRTTP50Ms, s.EchoRTTP50Ms = ms(300), ms(600), ms(600)
	s.PeerMaxWindowBytes = int64(small(16 << 20))
	s.P50InFlightBytes = int64(small(8 << 20))
	s.MaxInFlightBytes = s.P50InFlightBytes + int64(small(1<<20))
	s.TransferMs = ms(60000)
	if s.TransferMs > 0 {
		s.DataRateBps = float64(s.UniqueBytes) * 8 / (s.TransferMs / 1e3)
	}
	if r.IntN(6) == 0 && s.PathRTTMs > 0 && s.PeerMaxWindowBytes > 0 {
		s.DataRateBps = 8 * float64(s.PeerMaxWindowBytes) / (s.PathRTTMs / 1e3) * (0.5 + r.Float64())
	}
	s.ThroughputBps = s.DataRateBps * r.Float64()
	s.IdleGaps = small(50)
	s.IdleTotalMs, s.IdleMaxMs = s.TransferMs*r.Float64()*r.Float64(), ms(1000)
	s.PauseShare = r.Float64() * r.Float64()
	s.DelayedAckStalls = small(3)
	s.DelayedAckTotalMs = s.TransferMs * r.Float64() * 0.3
	s.WindowLimitedShare = r.Float64() * r.Float64()
	s.QueueDelayMs, s.QueueDelayP50Ms = ms(200), ms(100)
	s.QueueRTTSource = []string{"", "karn", "echo", "timestamps"}[r.IntN(4)]
	return d
}

func BenchmarkDiagnose(b *testing.B) {
	c := shortConnection(b)
	b.ReportAllocs()
	for b.Loop() {
		diagnose(c, DefaultWindowRatio)
	}
}

// FuzzSprintf checks sprintf against fmt.Sprintf on arbitrary formats:
// inside the subset it writes the same, outside it hands over to fmt.
func FuzzSprintf(f *testing.F) {
	for _, s := range []string{"%d %.3g %s %v", "%.1f ms, %%", "%5d", "%.", "%", "%.3%", "%.1000f", "%s %s %s %s %s"} {
		f.Add(s)
	}
	addr := netip.MustParseAddr("10.0.0.1")
	f.Fuzz(func(t *testing.T, format string) {
		got := sprintf(format, ai(-42), af(3.25), as("x"), aa(addr))
		want := fmt.Sprintf(format, int64(-42), 3.25, "x", addr)
		if got != want {
			t.Fatalf("%q: got %q, want %q", format, got, want)
		}
	})
}

// TestCSVNumbers checks appendG10 and appendSeconds6 against strconv on
// edge values and 300,000 random ones of each kind.
func TestCSVNumbers(t *testing.T) {
	g := func(v float64) {
		t.Helper()
		if got, want := string(appendG10(nil, v)), strconv.FormatFloat(v, 'g', 10, 64); got != want {
			t.Fatalf("appendG10(%v) = %q, want %q", v, got, want)
		}
	}
	s := func(d time.Duration) {
		t.Helper()
		if got, want := string(appendSeconds6(nil, d)), strconv.FormatFloat(d.Seconds(), 'f', 6, 64); got != want {
			t.Fatalf("appendSeconds6(%d) = %q, want %q", int64(d), got, want)
		}
	}
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 9999999999, 1e10, -9999999999, -1e10, 1e9 + 0.5, 0.1, 1e-5, 123456789012,
		math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, math.SmallestNonzeroFloat64, 4294967295, 1 << 53, -(1 << 53)} {
		g(v)
	}
	for _, d := range []time.Duration{0, 1, 499, 500, 501, 999, 1000, 1499, 1500, 1501, 999_999_499, 999_999_500, 999_999_501,
		1e15 - 1, 1e15, 1e15 + 500, -1, -500, -1500, math.MaxInt64, math.MinInt64} {
		s(d)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300_000 {
		g(float64(rng.Int64N(1<<40) - 1<<39))
		g(math.Float64frombits(rng.Uint64()))
		g(rng.Float64() * 1e6)
		s(time.Duration(rng.Int64N(1e15)))
		s(time.Duration(rng.Int64N(1e12))/1000*1000 + 500)
		s(time.Duration(rng.Int64()))
	}
}

// FuzzCSVNumbers checks appendG10 and appendSeconds6 against strconv.
func FuzzCSVNumbers(f *testing.F) {
	f.Add(1e9+0.5, int64(1500))
	f.Add(9999999999.0, int64(1e15-500))
	f.Fuzz(func(t *testing.T, v float64, ns int64) {
		if got, want := string(appendG10(nil, v)), strconv.FormatFloat(v, 'g', 10, 64); got != want {
			t.Fatalf("appendG10(%v) = %q, want %q", v, got, want)
		}
		d := time.Duration(ns)
		if got, want := string(appendSeconds6(nil, d)), strconv.FormatFloat(d.Seconds(), 'f', 6, 64); got != want {
			t.Fatalf("appendSeconds6(%d) = %q, want %q", ns, got, want)
		}
	})
}
