package pcapfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/wanlab/wanlab/analyzer/decode"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

func pcapBytes(t testing.TB, nanos bool, link layers.LinkType, frames ...[]byte) []byte {
	var buf bytes.Buffer
	var w *pcapgo.Writer
	if nanos {
		w = pcapgo.NewWriterNanos(&buf)
	} else {
		w = pcapgo.NewWriter(&buf)
	}
	if err := w.WriteFileHeader(65535, link); err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(f), Length: len(f) + 100}
		if err := w.WritePacket(ci, f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readAll(t *testing.T, data []byte) ([]Frame, error) {
	r, err := NewReader(bytes.NewReader(data), "test.pcap")
	if err != nil {
		return nil, err
	}
	var out []Frame
	for {
		f, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		f.Data = append([]byte(nil), f.Data...)
		out = append(out, f)
	}
}

func TestPcapResolutions(t *testing.T) {
	for _, nanos := range []bool{false, true} {
		frames, err := readAll(t, pcapBytes(t, nanos, layers.LinkTypeLinuxSLL, []byte{1, 2, 3}, []byte{4, 5}))
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) != 2 || frames[1].Link != decode.LinkSLL || frames[1].WireLen != 102 || !bytes.Equal(frames[1].Data, []byte{4, 5}) {
			t.Fatalf("nanos=%v: %+v", nanos, frames)
		}
		want := t0.Add(time.Millisecond)
		if !nanos {
			want = want.Truncate(time.Microsecond)
		}
		if !frames[1].Timestamp.Equal(want) {
			t.Errorf("nanos=%v: timestamp %v, want %v", nanos, frames[1].Timestamp, want)
		}
	}
}

func TestPcapngInterfaces(t *testing.T) {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{Name: "eth0", LinkType: layers.LinkTypeEthernet, SnapLength: 96}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	sll2, err := w.AddInterface(pcapgo.NgInterface{Name: "any", LinkType: layers.LinkTypeLinuxSLL2, SnapLength: 96})
	if err != nil {
		t.Fatal(err)
	}
	w.WritePacket(gopacket.CaptureInfo{Timestamp: t0, CaptureLength: 2, Length: 60, InterfaceIndex: 0}, []byte{1, 2})
	w.WritePacket(gopacket.CaptureInfo{Timestamp: t0.Add(time.Second), CaptureLength: 3, Length: 60, InterfaceIndex: sll2}, []byte{3, 4, 5})
	w.Flush()
	frames, err := readAll(t, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 || frames[0].Link != decode.LinkEthernet || frames[1].Link != decode.LinkSLL2 || frames[1].Interface != 1 {
		t.Fatalf("frames %+v", frames)
	}
}

func TestBadFiles(t *testing.T) {
	good := pcapBytes(t, true, layers.LinkTypeEthernet, make([]byte, 60), make([]byte, 60))
	if _, err := readAll(t, nil); !errors.Is(err, ErrFormat) {
		t.Errorf("empty: %v", err)
	}
	if _, err := readAll(t, []byte("GET / HTTP/1.1\r\n\r\n")); !errors.Is(err, ErrFormat) {
		t.Errorf("garbage: %v", err)
	}
	if _, err := readAll(t, good[:10]); !errors.Is(err, ErrFormat) {
		t.Errorf("cut header: %v", err)
	}
	frames, err := readAll(t, good[:len(good)-7])
	if !errors.Is(err, ErrTruncated) || len(frames) != 1 {
		t.Errorf("cut record: %d frames, %v", len(frames), err)
	}
	if _, err := readAll(t, pcapBytes(t, false, layers.LinkType(147))); !errors.Is(err, decode.ErrLinkType) {
		t.Errorf("unknown link type: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(pcapBytes(f, true, layers.LinkTypeEthernet, make([]byte, 60)))
	f.Add(pcapBytes(f, false, layers.LinkTypeRaw, []byte{0x45, 0, 0, 20}))
	var ng bytes.Buffer
	w, _ := pcapgo.NewNgWriter(&ng, layers.LinkTypeLinuxSLL2)
	w.WritePacket(gopacket.CaptureInfo{Timestamp: t0, CaptureLength: 4, Length: 4}, []byte{1, 2, 3, 4})
	w.Flush()
	f.Add(ng.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		if r.fast {
			sameAsPcapgo(t, data)
			if r.compressed == nil {
				sameMapped(t, data)
			}
			return
		}
		for i := 0; i < 10000; i++ {
			fr, err := r.Next()
			if err != nil {
				return
			}
			if fr.WireLen < 0 || len(fr.Data) > 1<<20 {
				t.Fatalf("frame %d: wire %d data %d", i, fr.WireLen, len(fr.Data))
			}
		}
	})
}

// sameAsPcapgo checks the fast pcap path frame for frame against pcapgo.
func sameAsPcapgo(t *testing.T, data []byte) {
	ours, err := NewReader(bytes.NewReader(data), "fuzz")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("pcapgo refuses a header we accepted: %v", err)
	}
	for i := 0; i < 10000; i++ {
		f, oerr := ours.Next()
		rd, ci, rerr := ref.ReadPacketData()
		if errors.Is(oerr, ErrTruncated) && rerr == io.EOF {
			// pcapgo ends cleanly when a record header is followed by none
			// of its data; we report the file as truncated.
			return
		}
		if rerr != nil && rerr != io.EOF && len(ours.RecordWarnings()) > 0 {
			// pcapgo stops at an impossible record header; we report it
			// and go on, as tshark does.
			return
		}
		if (oerr == nil) != (rerr == nil) {
			t.Fatalf("frame %d: ours %v, pcapgo %v", i, oerr, rerr)
		}
		if oerr != nil {
			if (oerr == io.EOF) != (rerr == io.EOF) {
				t.Fatalf("frame %d: ours %v, pcapgo %v", i, oerr, rerr)
			}
			return
		}
		if !bytes.Equal(f.Data, rd) || f.WireLen != ci.Length || !f.Timestamp.Equal(ci.Timestamp) {
			t.Fatalf("frame %d differs: ours %d bytes wire %d at %v, pcapgo %d bytes wire %d at %v",
				i, len(f.Data), f.WireLen, f.Timestamp, len(rd), ci.Length, ci.Timestamp)
		}
	}
}

func TestFastPathMatchesPcapgo(t *testing.T) {
	for _, nanos := range []bool{false, true} {
		frames := [][]byte{make([]byte, 60), make([]byte, 1514), {1}}
		sameAsPcapgo(t, pcapBytes(t, nanos, layers.LinkTypeEthernet, frames...))
	}
}

func TestHugeDeclaredRecord(t *testing.T) {
	// A 40-byte file whose header allows 4 GB records and whose record
	// claims 800 MB: the reader must report truncation without
	// allocating what the record claims.
	data := []byte("M<\xb2\xa1\x02\x00\x04\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\xff\xff\xff\xff\x01\x00\x00\x00" +
		"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x30\x00\x00\x00\x30" + "abcd")
	allocs := testing.AllocsPerRun(1, func() {
		_, err := readAll(t, data)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("err %v, want truncated", err)
		}
	})
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.TotalAlloc > 512<<20 {
		t.Errorf("reading a 48-byte file allocated %d MB in total (%v allocations)", ms.TotalAlloc>>20, allocs)
	}
}

// BenchmarkNext reads 96-byte records from memory; one op is one record.
func BenchmarkNext(b *testing.B) {
	frames := make([][]byte, 10000)
	for i := range frames {
		frames[i] = make([]byte, 96)
	}
	data := pcapBytes(b, true, layers.LinkTypeEthernet, frames...)
	b.SetBytes(96 + 16)
	b.ReportAllocs()
	var r *Reader
	n := len(frames)
	for b.Loop() {
		if n == len(frames) {
			var err error
			if r, err = NewReader(bytes.NewReader(data), "bench"); err != nil {
				b.Fatal(err)
			}
			n = 0
		}
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// TestGzipBrokenRecordAndPcapng: a gzip'd pcap is read by the same path
// as a plain one (a broken record reported, reading going on), and a
// gzip'd pcapng is read too.
func TestGzipBrokenRecordAndPcapng(t *testing.T) {
	frame := []byte{0x45, 0, 0, 20, 1, 2, 3, 4}
	plain := append(append(pcapBytes(t, false, layers.LinkTypeRaw), record(1_700_000_000, 0, 8, 4, frame)...), record(1_700_000_001, 0, 8, 8, frame)...)
	var ng bytes.Buffer
	w, _ := pcapgo.NewNgWriter(&ng, layers.LinkTypeRaw)
	w.WritePacket(gopacket.CaptureInfo{Timestamp: t0, CaptureLength: 8, Length: 8}, frame)
	w.Flush()
	for _, c := range []struct {
		name   string
		data   []byte
		frames int
		warns  int
	}{{"pcap", plain, 2, 1}, {"pcapng", ng.Bytes(), 1, 0}} {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(c.data)
		zw.Close()
		r, err := NewReader(bytes.NewReader(z.Bytes()), "gz")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			n++
		}
		if n != c.frames || len(r.RecordWarnings()) != c.warns || r.Offset() != int64(z.Len()) {
			t.Errorf("%s: %d frames, warnings %+v, offset %d of %d compressed bytes", c.name, n, r.RecordWarnings(), r.Offset(), z.Len())
		}
	}
}

func TestGzipPcap(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(pcapBytes(t, true, layers.LinkTypeRaw, []byte{0x45, 1}, []byte{0x45, 2}))
	zw.Close()
	frames, err := readAll(t, z.Bytes())
	if err != nil || len(frames) != 2 || frames[1].Data[1] != 2 || frames[0].Link != decode.LinkRaw {
		t.Fatalf("gzip'd pcap: %d frames, %v", len(frames), err)
	}
}

// record is one classic pcap record header (little endian, µs) and data.
func record(sec, usec, capLen, origLen uint32, data []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, sec)
	b = binary.LittleEndian.AppendUint32(b, usec)
	b = binary.LittleEndian.AppendUint32(b, capLen)
	b = binary.LittleEndian.AppendUint32(b, origLen)
	return append(b, data...)
}

func TestBrokenRecords(t *testing.T) {
	head := pcapBytes(t, false, layers.LinkTypeRaw)
	frame := []byte{0x45, 0, 0, 20, 1, 2, 3, 4}
	cases := []struct {
		name    string
		mid     []byte
		frames  int
		problem string
		resumed int64
	}{
		// Captured length over the original length: read, as tshark does.
		{"caplen over origlen", record(1_700_000_001, 0, 8, 4, frame), 3, "exceeds the original length", 24 + 24},
		// Over the snap length (here 65535, pcapBytes's), within what a
		// pcap reader accepts: read whole.
		{"caplen over snaplen", record(1_700_000_001, 0, 70000, 70000, make([]byte, 70000)), 3, "exceeds the file's snap length", 24 + 24},
		// An absurd length: the next record is found by its header.
		{"absurd caplen", append(record(1_700_000_001, 0, 0x7fff0000, 0x7fff0000, nil), 0xde, 0xad), 2, "exceeds the largest", 24 + 24 + 16 + 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := append(append(append([]byte(nil), head...), record(1_700_000_000, 0, 8, 8, frame)...), c.mid...)
			data = append(data, record(1_700_000_002, 0, 8, 8, frame)...)
			for _, mapped := range []bool{false, true} {
				var r *Reader
				if mapped {
					r = newMappedReader(data, "broken", nil)
				} else {
					var err error
					if r, err = NewReader(bytes.NewReader(data), "broken"); err != nil {
						t.Fatal(err)
					}
				}
				n := 0
				for {
					_, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("mapped %v: after %d frames: %v", mapped, n, err)
					}
					n++
				}
				w := r.RecordWarnings()
				if n != c.frames || len(w) != 1 || !strings.Contains(w[0].Problem, c.problem) || w[0].Offset != 24+24 || w[0].Frame != 2 || w[0].Resumed != c.resumed {
					t.Errorf("mapped %v: %d frames, warnings %+v; want %d frames, one at offset 48 (frame 2) resumed at %d: %q", mapped, n, w, c.frames, c.resumed, c.problem)
				}
			}
		})
	}
}

// FuzzBrokenRecords: whatever the record headers say, the reader ends
// (EOF or an error), never reads past the data, and agrees with itself
// mapped and streamed.
func FuzzBrokenRecords(f *testing.F) {
	frame := []byte{0x45, 0, 0, 20, 1, 2, 3, 4}
	f.Add(record(1_700_000_000, 0, 8, 4, frame), record(1_700_000_001, 0, 8, 8, frame))
	f.Add(append(record(1_700_000_000, 0, 0x7fff0000, 1, nil), 1, 2, 3), record(1_700_000_001, 0, 8, 8, frame))
	f.Add(record(1_700_000_000, 0, 70000, 70000, make([]byte, 100)), record(1_700_000_001, 5, 8, 8, frame))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		data := append(append(pcapBytes(t, false, layers.LinkTypeRaw), a...), b...)
		sameMapped(t, data)
	})
}
