package control_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/metrics"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/spec"
)

// lockedBuffer is a bytes.Buffer the tap's writer may append to while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// udp4 is a minimal IPv4/UDP packet.
func udp4(n int) []byte {
	p := make([]byte, 28+n)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, 17
	copy(p[12:], []byte{10, 0, 1, 2, 10, 0, 2, 2})
	binary.BigEndian.PutUint16(p[24:], uint16(8+n))
	return p
}

// TestContractWithTheProxy drives the real forwarder (over fake devices)
// through the control API, the metrics collector and the tap: the parser's
// own message for a bad spec, the canonical spec back, counters that match
// the packets sent, and a pcapng with both records of each packet.
func TestContractWithTheProxy(t *testing.T) {
	var file lockedBuffer
	ifaces := [2]string{"eth-a", "eth-b"}
	tp, err := tap.New(&file, 0, ifaces[:])
	if err != nil {
		t.Fatal(err)
	}
	fa := device.NewFake("fa", 1500, 8, 256)
	fb := device.NewFake("fb", 1500, 8, 256)
	p, err := proxy.New(context.Background(), [2]device.Device{fa, fb}, proxy.Options{
		Ifaces: ifaces, Specs: [2]spec.Impairment{{}, spec.PipelineImpairment(spec.MustParse("delay 1ms"))}, Seed: 1, HasSeed: true,
		Tap: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addr := "unix:" + filepath.Join(t.TempDir(), "eth-a-eth-b.sock")
	srv, err := control.Start(addr, p, control.Access{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := control.Dial(addr)

	err = c.Set("eth-b", "dela 5ms")
	if !control.BadSpec(err) || !strings.Contains(err.Error(), `"dela"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("bad spec: %v", err)
	}
	if specs, _ := c.Specs(); specs["eth-b"] != "delay 1ms" {
		t.Fatalf("running spec not kept after a bad one: %q", specs["eth-b"])
	}
	specs, err := c.SetSpecs("eth-b", "  delay   2ms  ")
	if err != nil {
		t.Fatal(err)
	}
	if specs["eth-b"] != "delay 2ms" || specs["eth-a"] != "" {
		t.Fatalf("specs after set: %q", specs)
	}

	const n = 10
	pkt := udp4(100)
	for i := 0; i < n; i++ {
		if !fa.Inject(pkt) {
			t.Fatal("fake device full")
		}
	}
	for i := 0; i < n; i++ {
		select {
		case got := <-fa.Written():
			if !bytes.Equal(got, pkt) {
				t.Fatalf("packet %d changed on an empty spec", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("packet %d never left", i)
		}
	}

	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Directions) != 2 || st.Directions[0].Iface != "eth-a" || st.Directions[1].Spec != "delay 2ms" {
		t.Fatalf("stats directions %+v", st.Directions)
	}
	if tot := st.Directions[0].Engine.Totals; tot.PacketsIn != n || tot.PacketsOut != n || tot.BytesOut != n*uint64(len(pkt)) {
		t.Fatalf("eth-a totals %+v", tot)
	}
	if st.Tap == nil {
		t.Fatal("stats without the tap's counters")
	}
	if len(st.Directions[1].Warnings) != 0 {
		t.Fatalf("warnings for 'delay 2ms': %q", st.Directions[1].Warnings)
	}

	// A correlated loss that realizes far less: applied as written, and
	// the answer and the stats carry the warning.
	specs, warnings, err := c.SetSpecsWarnings("eth-b", "delay 2ms loss 10% 50%")
	if err != nil {
		t.Fatal(err)
	}
	if specs["eth-b"] != "delay 2ms loss 10% 50%" || len(warnings) != 1 ||
		!strings.HasPrefix(warnings[0], "eth-b: loss 10% 50% realizes about 0.108%") {
		t.Fatalf("set a correlated loss: specs %q, warnings %q", specs, warnings)
	}
	if st, err = c.Stats(); err != nil || len(st.Directions[1].Warnings) != 1 || len(st.Directions[0].Warnings) != 0 {
		t.Fatalf("stats warnings after a correlated loss: %+v, %v", st.Directions, err)
	}
	if _, err := c.SetSpecs("eth-b", "delay 2ms"); err != nil {
		t.Fatal(err)
	}

	exp := "# HELP wanlab_proxy_packets_out_total Packets that left the impairment engine.\n" +
		"# TYPE wanlab_proxy_packets_out_total counter\n" +
		"wanlab_proxy_packets_out_total{class=\"default\",iface=\"eth-a\"} 10\n" +
		"wanlab_proxy_packets_out_total{class=\"default\",iface=\"eth-b\"} 0\n"
	if err := testutil.CollectAndCompare(metrics.NewCollector(p.Stats), strings.NewReader(exp),
		"wanlab_proxy_packets_out_total"); err != nil {
		t.Fatal(err)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(file.Bytes()), pcapgo.NgReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var in, out int
	for {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ci.InterfaceIndex != 0 || !bytes.Equal(data, pkt) || opts.Flags == nil {
			t.Fatalf("record on interface %d, %d bytes, flags %v", ci.InterfaceIndex, len(data), opts.Flags)
		}
		switch opts.Flags.Direction {
		case pcapgo.NgEpbFlagDirectionInbound:
			in++
		case pcapgo.NgEpbFlagDirectionOutbound:
			out++
		}
	}
	if in != n || out != n {
		t.Errorf("tap: %d inbound and %d outbound records, want %d each", in, out, n)
	}
}
