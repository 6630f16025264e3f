package fit

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// transfer is a download of n segments on client port port, starting at
// start: the handshake, the data with an ACK every second segment, a FIN.
func transfer(port uint16, n int, start time.Duration) []pkt {
	ms := time.Millisecond
	ps := []pkt{
		{dir: 0, syn: true, seq: 99, at: start},
		{dir: 1, syn: true, ack: true, seq: 4999, acknum: 100, at: start + 30*ms},
		{dir: 0, ack: true, seq: 100, acknum: 5000, at: start + 30*ms + 100*time.Microsecond},
	}
	at := start + 31*ms
	for i := range n {
		seq := uint32(5000 + 1000*i)
		ps = append(ps, pkt{dir: 1, ack: true, seq: seq, acknum: 100, payload: 1000, at: at})
		if i%2 == 1 {
			ps = append(ps, pkt{dir: 0, ack: true, seq: 100, acknum: seq + 1000, at: at + 30*ms})
		}
		at += 100 * time.Microsecond
	}
	ps = append(ps, pkt{dir: 1, ack: true, fin: true, seq: uint32(5000 + 1000*n), acknum: 100, at: at + 31*ms})
	for i := range ps {
		ps[i].cport = port
	}
	return ps
}

// cutPcapng rewrites the pcap at path as a pcapng whose block after the
// first keep frames is a packet on interface 4096, which the file never
// describes: the reader stops there ("interface id 4096 not present").
func cutPcapng(t *testing.T, path string, keep int) string {
	t.Helper()
	r, closer, err := openPcap(path)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{LinkType: layers.LinkTypeEthernet, SnapLength: 65535}, pcapgo.NgWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if i == keep {
			w.Flush()
			epb := binary.LittleEndian.AppendUint32(nil, 6)
			epb = binary.LittleEndian.AppendUint32(epb, 32)
			epb = binary.LittleEndian.AppendUint32(epb, 4096) // interface id
			epb = append(epb, make([]byte, 16)...)            // timestamp, lengths 0
			epb = binary.LittleEndian.AppendUint32(epb, 32)
			buf.Write(epb)
		}
		ci.InterfaceIndex = 0
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	out := filepath.Join(t.TempDir(), "cut.pcapng")
	if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

func openPcap(path string) (*pcapgo.Reader, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	r, err := pcapgo.NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, f, nil
}

// TestReaderWarningsReachTheFit: a capture the reader gives up on (a pcap
// that ends mid-record, a cut gzip, a pcapng whose block names an
// interface it never described, 9 packets in) is fitted on what came
// before, and says so: read_stopped, a note and a reader warning, in the
// JSON too. A whole file has none of them.
func TestReaderWarningsReachTheFit(t *testing.T) {
	whole := writeCapture(t, transfer(40000, 60, 0))
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cutPcap := filepath.Join(dir, "cut.pcap")
	os.WriteFile(cutPcap, b[:len(b)-700], 0o600)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(b)
	zw.Close()
	cutGz := filepath.Join(dir, "cut.pcap.gz")
	os.WriteFile(cutGz, gz.Bytes()[:gz.Len()*3/4], 0o600)

	f, err := File(whole, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.ReadStopped != "" || len(f.ReaderWarnings) != 0 {
		t.Errorf("whole file: read_stopped %q, reader warnings %q", f.ReadStopped, f.ReaderWarnings)
	}
	for name, path := range map[string]string{"pcap cut mid-record": cutPcap, "cut gzip": cutGz, "pcapng, interface 4096 not present": cutPcapng(t, whole, 9)} {
		f, err := File(path, Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if f.ReadStopped == "" || len(f.ReaderWarnings) == 0 {
			t.Errorf("%s: fitted with no word of the reader stopping: read_stopped %q, notes %q", name, f.ReadStopped, f.Notes)
			continue
		}
		noted := false
		for _, n := range f.Notes {
			noted = noted || strings.HasPrefix(n, "capture: read in part")
		}
		if !noted {
			t.Errorf("%s: notes %q", name, f.Notes)
		}
		var j bytes.Buffer
		if err := WriteJSON(&j, f); err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(j.Bytes(), &back); err != nil || back["read_stopped"] != f.ReadStopped || back["reader_warnings"] == nil {
			t.Errorf("%s: JSON read_stopped %v, reader_warnings %v (%v)", name, back["read_stopped"], back["reader_warnings"], err)
		}
	}
}

// TestOtherConnectionsSummarised: a capture of many connections lists the
// MaxOthersListed others with the most data and counts the rest, in the
// JSON and the text.
func TestOtherConnectionsSummarised(t *testing.T) {
	const conns = MaxOthersListed + 15
	var ps []pkt
	for i := range conns {
		ps = append(ps, transfer(uint16(41000+i), 2+i%5, time.Duration(i)*time.Second)...)
	}
	f, err := File(writeCapture(t, ps), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Others) != MaxOthersListed || f.OthersUnlisted != conns-1-MaxOthersListed {
		t.Errorf("%d others listed, %d unlisted; want %d and %d", len(f.Others), f.OthersUnlisted, MaxOthersListed, conns-1-MaxOthersListed)
	}
	for i := 1; i < len(f.Others); i++ {
		if f.Others[i].Index <= f.Others[i-1].Index {
			t.Errorf("others out of capture order: %d after %d", f.Others[i].Index, f.Others[i-1].Index)
		}
	}
	var text bytes.Buffer
	if err := WriteText(&text, f); err != nil || !strings.Contains(text.String(), "and 14 more") {
		t.Errorf("text does not count the unlisted: %v\n%s", err, text.String())
	}
}
