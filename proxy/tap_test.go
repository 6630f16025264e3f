package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/tap"
)

// TestTapRecordsWhatTheEngineDid: with --pcap, a forwarded packet is
// recorded as it entered and as it left its direction's engine, a dropped
// one as it entered and as dropped, with the reason.
func TestTapRecordsWhatTheEngineDid(t *testing.T) {
	var file bytes.Buffer
	tp, err := tap.New(&file, 0, []string{"eth-a", "eth-b"})
	if err != nil {
		t.Fatal(err)
	}
	fa := device.NewFake("fa", 1500, 8, 16)
	fb := device.NewFake("fb", 1500, 8, 16)
	p, err := New(context.Background(), [2]device.Device{fa, fb}, Options{
		Ifaces: [2]string{"eth-a", "eth-b"},
		Specs:  mustSpecs(t, [2]string{"delay 1ms", "loss 100%"}),
		Tap:    tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	pkt := ipv4(17, []byte("tapped"), 0, false)
	fa.Inject(pkt)
	fb.Inject(pkt)
	receive(t, fa, 5*time.Second)
	testenv.WaitFor(t, "the tap to count the loss drop", func() bool { return p.Stats().Directions[1].Engine.Totals.Drops.Loss == 1 })
	p.Close()
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(file.Bytes()), pcapgo.NgReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		iface   int
		dir     pcapgo.NgEpbFlag
		comment string
	}
	var got []rec
	var times [2]time.Time
	for {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, pkt) {
			t.Fatalf("recorded %x, want the packet", data)
		}
		x := rec{iface: ci.InterfaceIndex}
		if opts.Flags != nil {
			x.dir = opts.Flags.Direction
		}
		if len(opts.Comments) > 0 {
			x.comment = opts.Comments[0]
		}
		if x.iface == 0 {
			times[x.dir&1^1] = ci.Timestamp // [0] entered (inbound), [1] left
		}
		got = append(got, x)
	}
	want := map[rec]bool{
		{0, pcapgo.NgEpbFlagDirectionInbound, ""}:              true,
		{0, pcapgo.NgEpbFlagDirectionOutbound, ""}:             true,
		{1, pcapgo.NgEpbFlagDirectionInbound, ""}:              true,
		{1, pcapgo.NgEpbFlagDirectionInbound, "dropped: loss"}: true,
	}
	if len(got) != len(want) {
		t.Fatalf("records %+v, want %d", got, len(want))
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("unexpected record %+v (all: %+v)", g, got)
		}
	}
	if d := times[1].Sub(times[0]); d < time.Millisecond {
		t.Fatalf("entered and left eth-a %v apart, want the 1ms delay", d)
	}
}
