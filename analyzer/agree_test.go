package analyzer

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
	"github.com/wanlab/wanlab/internal/testenv"
)

func writeSynth(t testing.TB, cfg synth.Config) (string, synth.Truth) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "synth.pcap")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := synth.Write(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p, tr
}

// tsharkFlags maps tshark's tcp.analysis fields to ours.
var tsharkFlags = []struct {
	field string
	flag  PacketFlags
}{
	{"tcp.analysis.retransmission", Retransmission},
	{"tcp.analysis.fast_retransmission", FastRetransmission},
	{"tcp.analysis.spurious_retransmission", SpuriousRetransmission},
	{"tcp.analysis.out_of_order", OutOfOrder},
	{"tcp.analysis.lost_segment", LostSegment},
	{"tcp.analysis.ack_lost_segment", AckedUnseen},
	{"tcp.analysis.duplicate_ack", DupAck},
	{"tcp.analysis.zero_window", ZeroWindow},
	{"tcp.analysis.zero_window_probe", ZeroWindowProbe},
	{"tcp.analysis.window_full", WindowFull},
	{"tcp.analysis.window_update", WindowUpdate},
	{"tcp.analysis.keep_alive", KeepAlive},
}

type packetVerdict struct {
	flags  PacketFlags
	ackRTT time.Duration // -1: none
}

// comparedFlags are the flags the agreement is measured on.
const comparedFlags = AnyRetransmission | OutOfOrder | LostSegment | AckedUnseen | DupAck | ZeroWindow |
	ZeroWindowProbe | WindowFull | WindowUpdate | KeepAlive

// runTshark returns tshark's verdict per TCP frame number.
func runTshark(t *testing.T, path string) map[int]packetVerdict {
	t.Helper()
	return tsharkVerdicts(t, path, tsharkFlags)
}

// tsharkVerdicts runs tshark once on path (with extra options, such as
// -d for a decode-as) and returns, per TCP frame number, the ACK RTT and
// the flags whose fields it was given.
func tsharkVerdicts(t *testing.T, path string, flags []struct {
	field string
	flag  PacketFlags
}, extra ...string) map[int]packetVerdict {
	t.Helper()
	testenv.RequireCommand(t, "tshark")
	args := append([]string{"-n", "-r", path}, extra...)
	args = append(args, "-Y", "tcp", "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f",
		"-e", "frame.number", "-e", "tcp.analysis.ack_rtt")
	for _, f := range flags {
		args = append(args, "-e", f.field)
	}
	cmd := exec.Command("tshark", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	res := map[int]packetVerdict{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 2+len(flags) {
			t.Fatalf("tshark line %q: %d columns", sc.Text(), len(cols))
		}
		n, err := strconv.Atoi(cols[0])
		if err != nil {
			t.Fatalf("tshark frame number %q", cols[0])
		}
		v := packetVerdict{ackRTT: -1}
		if cols[1] != "" {
			f, err := strconv.ParseFloat(cols[1], 64)
			if err != nil {
				t.Fatalf("tshark ack_rtt %q", cols[1])
			}
			v.ackRTT = time.Duration(math.Round(f * 1e9))
		}
		for i, tf := range flags {
			if cols[2+i] != "" {
				v.flags |= tf.flag
			}
		}
		// Wireshark adds the generic retransmission item to fast and
		// spurious retransmissions too.
		if v.flags&(FastRetransmission|SpuriousRetransmission) != 0 {
			v.flags &^= Retransmission
		}
		res[n] = v
	}
	return res
}

// ourVerdicts runs the analyzer and records the same view.
func ourVerdicts(t *testing.T, path string) (map[int]packetVerdict, *Result) {
	t.Helper()
	ours := map[int]packetVerdict{}
	res, err := AnalyzeFile(path, Options{OnPacket: func(p *PacketInfo) {
		v := packetVerdict{flags: p.Flags, ackRTT: -1}
		if p.AckRTT != 0 && p.AckRTT != -1 { // tshark omits an ack_rtt of exactly zero; -1 is none; a negative one (timestamps that stepped back) it prints
			v.ackRTT = p.AckRTT
		}
		ours[p.Frame] = v
	}})
	if err != nil {
		t.Fatal(err)
	}
	return ours, res
}

// agreement compares per-packet flags and ack_rtt, returning the share of
// frames on which both agree and logging the first differences.
func agreement(t *testing.T, path string) float64 {
	t.Helper()
	theirs := runTshark(t, path)
	ours, _ := ourVerdicts(t, path)
	if len(theirs) == 0 {
		t.Fatalf("tshark saw no TCP frames in %s", path)
	}
	bad := 0
	for n, tv := range theirs {
		ov, ok := ours[n]
		flagsOK := ok && ov.flags&comparedFlags == tv.flags&comparedFlags
		rttOK := ok && (ov.ackRTT == tv.ackRTT || ov.ackRTT >= 0 && tv.ackRTT >= 0 && absDur(ov.ackRTT-tv.ackRTT) <= time.Microsecond)
		if !flagsOK || !rttOK {
			bad++
			if bad <= 10 {
				t.Logf("frame %d: ours flags %v rtt %v, tshark flags %v rtt %v", n, ov.flags&comparedFlags, ov.ackRTT, tv.flags&comparedFlags, tv.ackRTT)
			}
		}
	}
	if len(ours) != len(theirs) {
		t.Errorf("we analyzed %d TCP frames, tshark %d", len(ours), len(theirs))
	}
	return 1 - float64(bad)/float64(len(theirs))
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

var agreementScenarios = []struct {
	name string
	cfg  synth.Config
}{
	{"clean", synth.Config{Bytes: 2 << 20}},
	{"loss", synth.Config{Bytes: 2 << 20, Drop: map[int]bool{40: true, 300: true, 301: true, 900: true}}},
	{"reorder", synth.Config{Bytes: 1 << 20, Reorder: map[int]bool{30: true, 200: true, 500: true}}},
	{"delack", synth.Config{Bytes: 200_000, DelayedAck: true, OneWay: 2 * time.Millisecond}},
	{"window", synth.Config{Bytes: 4 << 20, Window: 256 << 10, OneWay: 15 * time.Millisecond}},
	{"zerowindow", synth.Config{Bytes: 256 << 10, Window: 64 << 10, ReadRate: 2e5}},
	{"tail-loss-rto", synth.Config{Bytes: 100 * 1448, Drop: map[int]bool{99: true}}},
}

func TestAgreementWithTshark(t *testing.T) {
	for _, sc := range agreementScenarios {
		t.Run(sc.name, func(t *testing.T) {
			path, _ := writeSynth(t, sc.cfg)
			a := agreement(t, path)
			t.Logf("agreement %.4f", a)
			if a < 0.99 {
				t.Errorf("per-packet agreement with tshark %.2f %% < 99 %%", a*100)
			}
		})
	}
}

func TestAgreementAtSender(t *testing.T) {
	for _, sc := range agreementScenarios {
		t.Run(sc.name, func(t *testing.T) {
			cfg := sc.cfg
			cfg.AtSender = true
			path, _ := writeSynth(t, cfg)
			a := agreement(t, path)
			t.Logf("agreement %.4f", a)
			if a < 0.99 {
				t.Errorf("per-packet agreement with tshark %.2f %% < 99 %%", a*100)
			}
		})
	}
}
