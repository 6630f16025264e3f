package vm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	frames := []frame{{frameHello, []byte(`{"release":"x"}`)}, {frameStdout, nil}, {frameStderr, bytes.Repeat([]byte{0, 0xff}, 3000)}, {framePowerOff, nil}}
	for _, f := range frames {
		if err := writeFrame(&b, f.typ, f.payload); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range frames {
		got, err := readFrame(&b)
		if err != nil {
			t.Fatal(err)
		}
		if got.typ != want.typ || !bytes.Equal(got.payload, want.payload) {
			t.Fatalf("got %q %d bytes, want %q %d bytes", got.typ, len(got.payload), want.typ, len(want.payload))
		}
	}
	if _, err := readFrame(&b); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want error
	}{
		{[]byte{'o', 0, 0, 0, 5, 'a'}, io.ErrUnexpectedEOF},
		{[]byte{'o', 0}, io.ErrUnexpectedEOF},
		{[]byte{'Z', 0, 0, 0, 0}, errFrameType},
	} {
		if _, err := readFrame(bytes.NewReader(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("readFrame(%x) = %v, want %v", tc.in, err, tc.want)
		}
	}
	if _, err := readFrame(bytes.NewReader([]byte{'o', 0xff, 0xff, 0xff, 0xff})); err == nil {
		t.Error("a 4 GB length was accepted")
	}
	if err := writeFrame(io.Discard, frameStdout, make([]byte, maxFrame+1)); err == nil {
		t.Error("an oversized frame was written")
	}
}

// FuzzReadFrame feeds arbitrary streams to the frame reader: it must never
// panic or allocate past maxFrame, and what it reads must write back as the
// same bytes.
func FuzzReadFrame(f *testing.F) {
	var seed bytes.Buffer
	writeFrame(&seed, frameRun, []byte(`{"argv":["tc","qdisc","show"]}`))
	writeFrame(&seed, frameExit, []byte(`{"code":3}`))
	f.Add(seed.Bytes())
	f.Add([]byte{'h', 0, 0, 0, 2, '{', '}'})
	f.Add([]byte{'x', 0, 0x10, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		consumed := 0
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			if len(fr.payload) > maxFrame {
				t.Fatalf("payload of %d bytes", len(fr.payload))
			}
			var out bytes.Buffer
			if err := writeFrame(&out, fr.typ, fr.payload); err != nil {
				t.Fatal(err)
			}
			n := 5 + len(fr.payload)
			if !bytes.Equal(out.Bytes(), in[consumed:consumed+n]) {
				t.Fatalf("frame %q re-encodes differently", fr.typ)
			}
			consumed += n
		}
	})
}
