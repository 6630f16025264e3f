package pcapfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// sameMapped checks the parser of mapped files frame for frame, error
// for error, against the stream path on the same bytes.
func sameMapped(t *testing.T, data []byte) {
	t.Helper()
	stream, err := NewReader(bytes.NewReader(data), "fuzz")
	if err != nil {
		t.Fatal(err)
	}
	mapped := newMappedReader(data, "fuzz", nil)
	if mapped == nil {
		t.Fatal("a classic pcap file is not read as mapped")
	}
	for i := 0; i < 10000; i++ {
		sf, serr := stream.Next()
		mf, merr := mapped.Next()
		if (serr == nil) != (merr == nil) || serr != nil && serr.Error() != merr.Error() {
			t.Fatalf("frame %d: stream %v, mapped %v", i, serr, merr)
		}
		if serr != nil {
			return
		}
		if !bytes.Equal(sf.Data, mf.Data) || sf.WireLen != mf.WireLen || !sf.Timestamp.Equal(mf.Timestamp) || sf.Link != mf.Link {
			t.Fatalf("frame %d: stream %d bytes wire %d at %v, mapped %d bytes wire %d at %v",
				i, len(sf.Data), sf.WireLen, sf.Timestamp, len(mf.Data), mf.WireLen, mf.Timestamp)
		}
	}
}

// openMapped opens path with Open, which must map it on Linux, and closes
// it when the test ends.
func openMapped(t *testing.T, path string) *Reader {
	t.Helper()
	r, c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if runtime.GOOS == "linux" && r.m == nil {
		t.Fatalf("Open did not map %s", path)
	}
	return r
}

// bigCapture returns a pcap file of n records of varied lengths.
func bigCapture(t *testing.T, n int) []byte {
	t.Helper()
	frames := make([][]byte, n)
	for i := range frames {
		f := make([]byte, 60+i%1400)
		f[0], f[1] = byte(i), byte(i>>8)
		frames[i] = f
	}
	return pcapBytes(t, true, layers.LinkTypeEthernet, frames...)
}

// TestOpenMapsLargeFiles reads a file that spans several chunks of the
// mapping through Open, with Next and with Frames, and compares every
// frame with the stream reader's.
func TestOpenMapsLargeFiles(t *testing.T) {
	data := bigCapture(t, 14000) // about 10 MB: three chunks
	if len(data) < 2*mapChunk+mapMin {
		t.Fatalf("capture of %d bytes is too small for the test", len(data))
	}
	sameMapped(t, data)
	path := filepath.Join(t.TempDir(), "big.pcap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := readAll(t, data)
	if err != nil {
		t.Fatal(err)
	}
	r := openMapped(t, path)
	i := 0
	for {
		n, err := r.Frames(1000, func(f *Frame) {
			if i >= len(want) || !bytes.Equal(f.Data, want[i].Data) || !f.Timestamp.Equal(want[i].Timestamp) || f.WireLen != want[i].WireLen {
				t.Fatalf("frame %d differs from the stream reader's", i)
			}
			i++
		})
		if err == io.EOF {
			break
		}
		if err != nil || n != 1000 {
			t.Fatalf("after %d frames: %d passed, %v", i, n, err)
		}
	}
	if i != len(want) {
		t.Fatalf("%d frames, want %d", i, len(want))
	}
	if r.Offset() != int64(len(data)) {
		t.Errorf("offset %d at the end, want %d", r.Offset(), len(data))
	}
}

// TestMappedFileThatGrows appends records after Open (a capture still
// being written): they are read after the mapped part.
func TestMappedFileThatGrows(t *testing.T) {
	data := bigCapture(t, 3000)
	more := bigCapture(t, 10)[24:] // records without the file header
	path := filepath.Join(t.TempDir(), "growing.pcap")
	cut := len(data) - 30 // the last record is half written at Open
	if err := os.WriteFile(path, data[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	r := openMapped(t, path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data[cut:])
	f.Write(more)
	f.Close()
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", n, err)
		}
		n++
	}
	if n != 3010 {
		t.Fatalf("%d frames, want 3010", n)
	}
}

// TestMappedFileThatShrinks truncates the file under the reader: the
// pages past the new end fault, which must come out as an error naming
// the file, not a crash.
func TestMappedFileThatShrinks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("files are mapped on Linux only")
	}
	data := bigCapture(t, 14000)
	path := filepath.Join(t.TempDir(), "shrinking.pcap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := r.Frames(100, func(*Frame) {}); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<20); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var seen int
	_, err = r.Frames(1<<30, func(f *Frame) { seen += int(f.Data[len(f.Data)-1]) })
	if !errors.Is(err, ErrTruncated) || !bytes.Contains([]byte(err.Error()), []byte(path)) {
		t.Fatalf("reading past the new end: %v (after %v), want an error naming %s that wraps ErrTruncated", err, time.Since(start), path)
	}
	t.Logf("after truncation: %v", err)
	// A fault in fn outside the mapping is fn's own: it stays a panic.
	defer func() {
		if recover() == nil {
			t.Error("a nil dereference in fn did not panic")
		}
	}()
	r2, c2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	var p *Frame
	r2.Frames(1, func(*Frame) { _ = p.WireLen })
}
