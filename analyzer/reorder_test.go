package analyzer

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
	"github.com/wanlab/wanlab/internal/testenv"
)

// synthFrames returns the frames of a synthetic capture.
func synthFrames(t *testing.T, cfg synth.Config) []memFrame {
	t.Helper()
	var buf bytes.Buffer
	if _, err := synth.Write(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	r := mustReader(t, buf.Bytes())
	var frames []memFrame
	for {
		f, err := r.Next()
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, memFrame{append([]byte(nil), f.Data...), f.WireLen, f.Timestamp})
	}
}

// ifaceFrame is a frame of a multi-interface capture.
type ifaceFrame struct {
	memFrame
	iface int
}

// writePcapng writes frames, in the given order, to a pcapng file with
// two Ethernet interfaces.
func writePcapng(t *testing.T, path string, frames []ifaceFrame) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	intf := pcapgo.DefaultNgInterface
	intf.LinkType = layers.LinkTypeEthernet
	w, err := pcapgo.NewNgWriterInterface(f, intf, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	intf.Name = "eth1"
	if _, err := w.AddInterface(intf); err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: fr.ts, CaptureLength: len(fr.data), Length: fr.wire, InterfaceIndex: fr.iface}
		if err := w.WritePacket(ci, fr.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// renumberPort moves a synthetic capture's client to port 40000+d, so two
// captures make two connections.
func renumberPort(fr memFrame, d uint16) memFrame {
	b := append([]byte(nil), fr.data...)
	for _, off := range []int{34, 36} { // TCP source and destination ports
		if b[off] == 40000>>8 && b[off+1] == 40000&0xff {
			b[off], b[off+1] = byte((40000+d)>>8), byte(40000+d)
		}
	}
	return memFrame{b, fr.wire, fr.ts}
}

// TestTwoInterfacesMatchReordercap writes a two-interface pcapng as
// dumpcap does (each interface's frames in batches, so hundreds of frames
// are older than the latest) and checks every frame's flags against
// tshark's on the file reordercap sorted.
func TestTwoInterfacesMatchReordercap(t *testing.T) {
	testenv.RequireCommand(t, "reordercap")
	a := synthFrames(t, synth.Config{Bytes: 1 << 20, Drop: map[int]bool{40: true, 300: true, 301: true}, AtSender: true})
	b := synthFrames(t, synth.Config{Bytes: 1 << 20, Reorder: map[int]bool{30: true, 200: true}, Drop: map[int]bool{500: true}})
	var ifs [2][]ifaceFrame
	for _, f := range a {
		ifs[0] = append(ifs[0], ifaceFrame{f, 0})
	}
	for _, f := range b {
		f = renumberPort(f, 1)
		f.ts = f.ts.Add(250*time.Microsecond + 7) // interleave, no equal times
		ifs[1] = append(ifs[1], ifaceFrame{f, 1})
	}
	// Batches of 300 frames per interface, alternating.
	var file []ifaceFrame
	for len(ifs[0])+len(ifs[1]) > 0 {
		for i := range ifs {
			n := min(300, len(ifs[i]))
			file = append(file, ifs[i][:n]...)
			ifs[i] = ifs[i][n:]
		}
	}
	dir := t.TempDir()
	mixed, sorted := filepath.Join(dir, "mixed.pcapng"), filepath.Join(dir, "sorted.pcapng")
	writePcapng(t, mixed, file)
	if out, err := exec.Command("reordercap", mixed, sorted).CombinedOutput(); err != nil {
		t.Fatalf("reordercap: %v\n%s", err, out)
	}
	// Frame n of the mixed file is frame sortedNo[n] of the sorted one.
	order := make([]int, len(file))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return file[order[i]].ts.Before(file[order[j]].ts) })
	sortedNo := make([]int, len(file)+1)
	for pos, i := range order {
		sortedNo[i+1] = pos + 1
	}

	theirs := runTshark(t, sorted)
	ours, res := ourVerdicts(t, mixed)
	if res.TimeBackwards != 0 {
		t.Errorf("%d frames could not be placed", res.TimeBackwards)
	}
	if len(ours) != len(theirs) {
		t.Errorf("we analyzed %d TCP frames, tshark %d", len(ours), len(theirs))
	}
	var flagged, bad int
	for n, ov := range ours {
		tv, ok := theirs[sortedNo[n]]
		if ov.flags&comparedFlags != 0 {
			flagged++
		}
		rttOK := ov.ackRTT == tv.ackRTT || ov.ackRTT >= 0 && tv.ackRTT >= 0 && absDur(ov.ackRTT-tv.ackRTT) <= time.Microsecond
		if !ok || ov.flags&comparedFlags != tv.flags&comparedFlags || !rttOK {
			bad++
			if bad <= 10 {
				t.Errorf("frame %d (sorted %d): ours %v rtt %v, tshark %v rtt %v", n, sortedNo[n], ov.flags&comparedFlags, ov.ackRTT, tv.flags&comparedFlags, tv.ackRTT)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d frames differ from tshark after reordercap", bad, len(ours))
	}
	if flagged < 10 {
		t.Errorf("only %d frames carry a flag: the capture tests little", flagged)
	}
}

// TestDuplicateCapture checks that a capture holding every packet twice
// (two interfaces of one router: the same IP ID a few microseconds apart,
// TTL one lower) is analyzed as one copy, never as retransmissions.
func TestDuplicateCapture(t *testing.T) {
	frames := synthFrames(t, synth.Config{Bytes: 1 << 20, Drop: map[int]bool{100: true}})
	var once, twice []ifaceFrame
	for i, f := range frames {
		f.data[18], f.data[19] = byte((i+1)>>8), byte(i+1) // IP ID
		once = append(once, ifaceFrame{f, 0})
		c := memFrame{append([]byte(nil), f.data...), f.wire, f.ts.Add(20 * time.Microsecond)}
		c.data[22]-- // TTL
		twice = append(twice, ifaceFrame{f, 0}, ifaceFrame{c, 1})
	}
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "once.pcapng"), filepath.Join(dir, "twice.pcapng")
	writePcapng(t, p1, once)
	writePcapng(t, p2, twice)
	r1, err := AnalyzeFile(p1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := AnalyzeFile(p2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r2.DuplicateFrames != len(frames) {
		t.Errorf("%d duplicate frames, want %d", r2.DuplicateFrames, len(frames))
	}
	if r1.DuplicateFrames != 0 {
		t.Errorf("%d duplicate frames in the single copy", r1.DuplicateFrames)
	}
	d1, d2 := r1.Connections[0].Directions[1], r2.Connections[0].Directions[1]
	if d2.CaptureDuplicates != d1.Packets {
		t.Errorf("%d capture duplicates of %d packets", d2.CaptureDuplicates, d1.Packets)
	}
	d2s := d2.DirectionStats
	d2s.CaptureDuplicates = 0
	if d1.DirectionStats != d2s {
		t.Errorf("the doubled capture's stats differ:\n once %+v\ntwice %+v", d1.DirectionStats, d2.DirectionStats)
	}
	if d2.RetransmittedPackets != d1.RetransmittedPackets || d1.RetransmittedPackets == 0 {
		t.Errorf("retransmissions: doubled %d, single %d", d2.RetransmittedPackets, d1.RetransmittedPackets)
	}
}
