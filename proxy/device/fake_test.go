package device

import (
	"errors"
	"os"
	"testing"
)

func TestFakeBatches(t *testing.T) {
	f := NewFake("fake0", 1500, 4, 16)
	var d Device = f
	for i := range 6 {
		f.Inject([]byte{byte(i), 1, 2})
	}
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 100)
	}
	sizes := make([]int, 8)
	n, err := d.Read(bufs, sizes, 10)
	if err != nil || n != 4 {
		t.Fatalf("Read = %d, %v; want a batch of 4", n, err)
	}
	if sizes[3] != 3 || bufs[3][10] != 3 {
		t.Fatalf("packet 3 = %v", bufs[3][10:10+sizes[3]])
	}
	if _, err := d.Write([][]byte{bufs[0][:13]}, 10); err != nil {
		t.Fatal(err)
	}
	if got := <-f.Written(); len(got) != 3 || got[0] != 0 {
		t.Fatalf("written %v", got)
	}
	f.Close()
	if _, err := d.Read(bufs, sizes, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}
