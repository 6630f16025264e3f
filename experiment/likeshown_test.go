package experiment

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/units"
)

// likeFit is a fit of a transfer over delay oneWay each way, the given
// parameters of the data direction set (a Param with Unknown set is
// withheld).
func likeFit(direction string, oneWay string, params map[string]fit.Param) *fit.Result {
	p := map[string]fit.Param{"rtt_ms": {Value: 20}, "rate_bps": {Unknown: "never filled"},
		"jitter_ms": {Value: 0}, "loss_percent": {Value: 0}, "mss_bytes": {Value: 1448}}
	for k, v := range params {
		p[k] = v
	}
	spec := ""
	if oneWay != "" {
		spec = "delay " + oneWay
	}
	return &fit.Result{File: "field.pcap", Transfer: fit.Transfer{Direction: direction},
		Directions: []fit.Direction{{Data: true, Spec: spec, Params: p, CongestionControl: "loss-based (cubic)"},
			{Spec: spec, Params: map[string]fit.Param{"rtt_ms": p["rtt_ms"]}}}}
}

func likeCfg(t *testing.T, f *fit.Result) Config {
	t.Helper()
	cfg, err := LikeConfig(f, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func notShownNames(ns []NotShown) string {
	var names []string
	for _, n := range ns {
		names = append(names, n.What)
	}
	return strings.Join(names, "|")
}

// An application-limited sender (here an upload: the lab's server sends
// it) writes at the rate it sent at while it had data, stopping as often
// and as long in all as it waited.
func TestShownPathPacesAnApplicationLimitedSender(t *testing.T) {
	f := likeFit("upload", "10ms", nil)
	d := &analyzer.Direction{DirectionStats: analyzer.DirectionStats{UniqueBytes: 1_000_000, TransferMs: 2000,
		IdleTotalMs: 500, IdleGaps: 5, TurnTotalMs: 500, Turns: 5, PathRTTMs: 20, PathRTTP50Ms: 20}}
	d.Diagnosis = &analyzer.Diagnosis{Limit: analyzer.LimitApplication}
	cfg := likeCfg(t, f)
	ns := shownPath(&cfg, f, d)
	if cfg.WriteRate != 8*units.Mbit || cfg.WritePauses != 10 || cfg.WritePause != 100*time.Millisecond {
		t.Errorf("paced at %v, %d pauses of %v: want 8 Mbit/s (1 MB in the 1 s busy), 10 of 100 ms", cfg.WriteRate, cfg.WritePauses, cfg.WritePause)
	}
	if cfg.WriteChunk < 1448 {
		t.Errorf("write chunk %v: under one segment", cfg.WriteChunk)
	}
	if names := notShownNames(ns); !strings.Contains(names, "the application's pace") {
		t.Errorf("not shown: %s", names)
	}
}

// Where the fit withheld the round trip, the lab takes the capture's own
// minimum, split evenly, and says so.
func TestShownPathTakesTheCapturesRoundTrip(t *testing.T) {
	f := likeFit("download", "", map[string]fit.Param{"rtt_ms": {Unknown: "withheld: the self-check"}})
	d := &analyzer.Direction{DirectionStats: analyzer.DirectionStats{UniqueBytes: 1_000_000, TransferMs: 2000,
		PathRTTMs: 80, PathRTTP50Ms: 80, PathRTTSource: "handshake"}}
	cfg := likeCfg(t, f)
	ns := shownPath(&cfg, f, d)
	for _, dir := range []string{ToClient, ToServer} {
		if cfg.Impair[dir] != "delay 40000us" {
			t.Errorf("%s: %q, want delay 40000us", dir, cfg.Impair[dir])
		}
	}
	if names := notShownNames(ns); !strings.Contains(names, "the path's round trip") || !strings.Contains(names, "a bottleneck") {
		t.Errorf("not shown: %s", names)
	}
}

// A request/response server thinks for what the path leaves of the
// median latency; Nagle's algorithm stays on only for a delayed-ACK stall
// a Linux client makes (seed 003's), and a longer one goes into the think
// time.
func TestShownAnswersThinkTime(t *testing.T) {
	for _, tc := range []struct {
		name           string
		limit          string
		latency, think float64
		wantThink      time.Duration
		wantNagle      bool
	}{
		{"application", analyzer.LimitApplication, 100, 5, 80 * time.Millisecond, false},
		{"seed 003's stall", analyzer.LimitDelayedAck, 70, 1, time.Millisecond, true},
		{"a stall longer than Linux's", analyzer.LimitDelayedAck, 300, 1, 280 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := likeFit("request-response", "10ms", nil)
			f.Transfer.Limit = tc.limit
			f.RequestResponse = &fit.RequestResponse{Connections: 1, Requests: 5, ResponseBytes: 2000, ThinkMs: tc.think,
				LatencyP50Ms: tc.latency, LatencyP99Ms: tc.latency}
			d := &analyzer.Direction{DirectionStats: analyzer.DirectionStats{UniqueBytes: 10000, TransferMs: 500, PathRTTMs: 20, PathRTTP50Ms: 20}}
			cfg := likeCfg(t, f)
			shownPath(&cfg, f, d)
			if cfg.ThinkTime != tc.wantThink || cfg.NoNagle == tc.wantNagle {
				t.Errorf("think %v, Nagle %v: want %v, %v", cfg.ThinkTime, !cfg.NoNagle, tc.wantThink, tc.wantNagle)
			}
		})
	}
}

// An upload's lab turns the roles round: the original client's sysctls
// (its sender's) go to the lab's server, and the capture taken at the
// original's server (the receiver) is compared with the lab's client's.
func TestLikeConfigTurnsAnUploadRound(t *testing.T) {
	f := likeFit("upload", "10ms", nil)
	f.CapturedAt = "server"
	f.Sysctls = fit.Sysctls{Client: map[string]string{"net.ipv4.tcp_sack": "0"}, Server: map[string]string{"net.ipv4.tcp_rmem": "4096 131072 131072"}}
	cfg := likeCfg(t, f)
	if cfg.ServerSysctls["net.ipv4.tcp_sack"] != "0" || cfg.ClientSysctls["net.ipv4.tcp_rmem"] == "" {
		t.Errorf("sysctls: client %v, server %v", cfg.ClientSysctls, cfg.ServerSysctls)
	}
	if cfg.Size != 64<<10 || labSide(f) != SideClient {
		t.Errorf("size %v, side %s: want 64 KiB at the least, the client's (the receiver's)", cfg.Size, labSide(f))
	}
}

// The verdict is Pantheon's, and like.json stays JSON where the
// original measured nothing (no infinity).
func TestVerdictWithoutAnOriginalFigure(t *testing.T) {
	orig, rep := likeFit("download", "10ms", nil), likeFit("download", "10ms", nil)
	orig.Transfer.RateBps, rep.Transfer.RateBps = 10e6, 11.4e6
	od := &analyzer.Direction{DirectionStats: analyzer.DirectionStats{PathRTTP50Ms: 20}}
	rd := &analyzer.Direction{DirectionStats: analyzer.DirectionStats{PathRTTP50Ms: 20.9}}
	if v := verdict(orig, rep, od, rd); !v.Within || !v.RateWithin || !v.RTTWithin {
		t.Errorf("14 %% and 4.5 %% off: %+v, want within", v)
	}
	rd.PathRTTP50Ms = 21.2
	if v := verdict(orig, rep, od, rd); v.Within || v.RTTWithin {
		t.Errorf("the RTT 6 %% off: %+v, want not within", v)
	}
	orig.Transfer.RateBps, od.PathRTTP50Ms = 0, 0
	v := verdict(orig, rep, od, rd)
	if v.Within || v.Error != 1 || v.RTTError != 1 {
		t.Errorf("nothing measured: %+v", v)
	}
	if _, err := json.Marshal(LikeResult{Verdict: v, Similarity: compare(orig, rep)}); err != nil {
		t.Error(err)
	}
}
