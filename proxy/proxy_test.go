package proxy

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/spec"
)

// fakeProxy runs the forwarder over two fake devices.
func fakeProxy(t *testing.T, specs [2]string) (*Forwarder, [2]*device.Fake) {
	t.Helper()
	fa := device.NewFake("fa", 1500, 8, 256)
	fb := device.NewFake("fb", 1500, 8, 256)
	p, err := New(context.Background(), [2]device.Device{fa, fb}, Options{
		Ifaces:  [2]string{"eth-a", "eth-b"},
		Specs:   mustSpecs(t, specs),
		Seed:    1,
		HasSeed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, [2]*device.Fake{fa, fb}
}

func receive(t *testing.T, f *device.Fake, within time.Duration) []byte {
	t.Helper()
	select {
	case p := <-f.Written():
		return p
	case <-time.After(within):
		t.Fatalf("%s: nothing written within %v", f.Name(), within)
		return nil
	}
}

// TestForwardsEveryKind passes IPv4 and IPv6 TCP, UDP, ICMP and IPv4
// fragments through an empty spec: each comes out of the same direction's
// device unchanged and in order.
func TestForwardsEveryKind(t *testing.T) {
	_, devs := fakeProxy(t, [2]string{"", ""})
	payload := bytes.Repeat([]byte("wanlab"), 50)
	pkts := [][]byte{
		ipv4(6, payload[:40], 0, false),
		ipv4(17, payload[:20], 0, false),
		ipv4(1, payload[:16], 0, false),
		ipv4(17, payload[:96], 0, true), // first fragment
		ipv4(17, payload[:32], 12, false),
		ipv6(6, payload[:40]),
		ipv6(17, payload[:20]),
		ipv6(58, payload[:16]),
		ipv6(44, payload[:64]), // fragment header
	}
	for dir, f := range devs {
		for _, p := range pkts {
			f.Inject(p)
		}
		for i, want := range pkts {
			got := receive(t, f, 5*time.Second)
			if !bytes.Equal(got, want) {
				t.Fatalf("direction %d packet %d changed:\n got %x\nwant %x", dir, i, got, want)
			}
		}
	}
}

func TestMalformedCountedAndDropped(t *testing.T) {
	p, devs := fakeProxy(t, [2]string{"", ""})
	good := ipv4(17, []byte("ok"), 0, false)
	bad := [][]byte{
		{},
		{0x45},
		good[:10],
		append([]byte{0x75}, good[1:]...),
		append([]byte{0x43}, good[1:]...),
		ipv6(17, []byte("x"))[:30],
	}
	for _, b := range bad {
		devs[1].Inject(b)
	}
	devs[1].Inject(good)
	if got := receive(t, devs[1], 5*time.Second); !bytes.Equal(got, good) {
		t.Fatalf("got %x, want the good packet", got)
	}
	st := p.Stats()
	if n := st.Directions[1].Device.Malformed; n != uint64(len(bad)) {
		t.Fatalf("malformed = %d, want %d", n, len(bad))
	}
	if n := st.Directions[1].Engine.Totals.PacketsIn; n != 1 {
		t.Fatalf("engine saw %d packets, want 1", n)
	}
}

// TestDelayPerDirection: a delay on B's direction holds packets leaving
// through B at least that long; A's direction is not delayed by it.
func TestDelayPerDirection(t *testing.T) {
	_, devs := fakeProxy(t, [2]string{"", "delay 30ms"})
	pkt := ipv4(17, []byte("probe"), 0, false)
	t0 := time.Now()
	devs[1].Inject(pkt)
	receive(t, devs[1], 5*time.Second)
	if d := time.Since(t0); d < 30*time.Millisecond {
		t.Fatalf("delayed direction released after %v, want >= 30ms", d)
	}
	t0 = time.Now()
	devs[0].Inject(pkt)
	receive(t, devs[0], 5*time.Second)
	if d := time.Since(t0); d >= 30*time.Millisecond {
		t.Fatalf("undelayed direction took %v", d)
	}
}

// TestSetSpecKeepsInFlight swaps a long delay for none while a packet is
// inside: the new packet overtakes, the old one still arrives.
func TestSetSpecKeepsInFlight(t *testing.T) {
	p, devs := fakeProxy(t, [2]string{"delay 300ms", "delay 300ms"})
	old := ipv4(17, []byte("old"), 0, false)
	devs[0].Inject(old)
	// Wait until the engine holds it.
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Directions[0].Engine.Totals.PacketsIn == 0 {
		if time.Now().After(deadline) {
			t.Fatal("packet never reached the engine")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.SetSpec("eth-a", "dela 1ms"); err == nil || !strings.Contains(err.Error(), `"dela"`) {
		t.Fatalf("bad spec: err = %v, want the parser's message", err)
	}
	if got := p.Specs()["eth-a"]; !strings.Contains(got, "300ms") {
		t.Fatalf("spec after a rejected set = %q", got)
	}
	if err := p.SetSpec("eth-a", ""); err != nil {
		t.Fatal(err)
	}
	if got := p.Specs(); got["eth-a"] != "" || !strings.Contains(got["eth-b"], "300ms") {
		t.Fatalf("specs = %v, want eth-a empty and eth-b unchanged", got)
	}
	fresh := ipv4(17, []byte("new"), 0, false)
	devs[0].Inject(fresh)
	if got := receive(t, devs[0], 5*time.Second); !bytes.Equal(got, fresh) {
		t.Fatalf("first out = %q, want the new packet", got[20:])
	}
	if got := receive(t, devs[0], 5*time.Second); !bytes.Equal(got, old) {
		t.Fatalf("second out = %q, want the in-flight packet", got[20:])
	}
	if err := p.SetSpec("eth-x", ""); err == nil {
		t.Fatal("SetSpec on an unknown interface succeeded")
	}
}

// mustSpecs parses a test's two spec texts, as the command line does.
func mustSpecs(t testing.TB, texts [2]string) [2]spec.Impairment {
	t.Helper()
	var out [2]spec.Impairment
	for i, text := range texts {
		im, err := spec.ParseImpairment(text)
		if err != nil {
			t.Fatalf("spec %q: %v", text, err)
		}
		out[i] = im
	}
	return out
}

// TestBadStartSpec: a typed spec that does not validate (built in code,
// not parsed) is refused by New, naming the direction.
func TestBadStartSpec(t *testing.T) {
	bad := &spec.Spec{Stages: []spec.Stage{&spec.Netem{Loss: spec.Loss{Kind: spec.LossRandom, P: 120}}}}
	_, err := New(context.Background(), [2]device.Device{device.NewFake("fa", 1500, 1, 1), device.NewFake("fb", 1500, 1, 1)}, Options{
		Ifaces: [2]string{"a", "b"},
		Specs:  [2]spec.Impairment{{}, spec.PipelineImpairment(bad)},
	})
	if err == nil || !strings.Contains(err.Error(), "b:") {
		t.Fatalf("err = %v, want the spec error naming interface b", err)
	}
}
