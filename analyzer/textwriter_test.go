package analyzer

import (
	"bytes"
	"os"
	"testing"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

// TestTextWriterMatchesWriteText checks that the text written through the
// spool as connections finish is WriteText's, byte for byte, and that the
// spool leaves no file behind.
func TestTextWriterMatchesWriteText(t *testing.T) {
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, synth.ManyConfig{Conns: 300, Concurrent: 10}); err != nil {
		t.Fatal(err)
	}
	capture := buf.Bytes()
	whole, err := AnalyzeReader(mustReader(t, capture), Options{NoSeries: true, FinishedPoints: -1})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := WriteText(&want, whole, whole.Connections); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	var got bytes.Buffer
	tw, err := NewTextWriter(&got, dir)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("spool visible in %s: %v", dir, left)
	}
	n := 0
	res, err := AnalyzeReader(mustReader(t, capture), Options{NoSeries: true, FinishedPoints: -1, ConcurrentFinish: true,
		OnFinish: func(c *Connection) {
			n++
			if err := tw.Connection(c); err != nil {
				t.Error(err)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(res, n); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("spooled text differs from WriteText's (%d and %d bytes)", got.Len(), want.Len())
	}
}
