package pair

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/lab/traffic"
)

func TestParsePing(t *testing.T) {
	out := []byte("PING 10.201.2.2 (10.201.2.2): 56 data bytes\n" +
		"64 bytes from 10.201.2.2: seq=0 ttl=63 time=110.215 ms\n" +
		"64 bytes from 10.201.2.2: seq=1 ttl=63 time=100.860 ms\n\n" +
		"--- 10.201.2.2 ping statistics ---\nround-trip min/avg/max = 100.860/105.537/110.215 ms\n")
	got := parsePing(out)
	want := []time.Duration{110215 * time.Microsecond, 100860 * time.Microsecond}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parsePing = %v, want %v", got, want)
	}
	if got := parsePing([]byte("ping: sendto: Network unreachable\n")); len(got) != 0 {
		t.Errorf("no echo: %v", got)
	}
}

func FuzzParsePing(f *testing.F) {
	f.Add([]byte("64 bytes from 10.0.0.1: seq=0 ttl=64 time=0.860 ms\n"))
	f.Add([]byte("time=1e400 ms time=-1 ms time=. ms"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range parsePing(b) {
			if d < 0 {
				t.Fatalf("negative round trip %v from %q", d, b)
			}
		}
	})
}

func TestProgressWriter(t *testing.T) {
	var got []traffic.Progress
	pw := &progressWriter{fn: func(p traffic.Progress) { got = append(got, p) }}
	var stream bytes.Buffer
	enc := json.NewEncoder(&stream)
	enc.Encode(traffic.Progress{Bytes: 1 << 20, Total: 4 << 20})
	stream.WriteString("wanlab: download: connect 10.201.2.2:80: refused\n")
	enc.Encode(traffic.Progress{Bytes: 4 << 20, Total: 4 << 20, Done: true})
	b := stream.Bytes()
	// Frames split anywhere, as the control channel delivers them.
	for len(b) > 0 {
		n := min(7, len(b))
		pw.Write(b[:n])
		b = b[n:]
	}
	if len(got) != 2 || got[0].Bytes != 1<<20 || !got[1].Done {
		t.Fatalf("progress %+v", got)
	}
	if s := pw.rest.String(); !strings.Contains(s, "refused") {
		t.Errorf("the command's own stderr %q lost", s)
	}
}

func FuzzProgressWriter(f *testing.F) {
	f.Add([]byte(`{"bytes":1,"total":2}` + "\n" + "x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		pw := &progressWriter{fn: func(traffic.Progress) { n++ }}
		if w, err := pw.Write(b); w != len(b) || err != nil {
			t.Fatalf("Write = %d, %v", w, err)
		}
		if n > bytes.Count(b, []byte("\n")) {
			t.Fatalf("%d progress reports from %d lines", n, bytes.Count(b, []byte("\n")))
		}
	})
}

func TestGuestCommandsRefuseTheHost(t *testing.T) {
	if inGuest() {
		t.Skip("running inside a wanlab VM")
	}
	if err := GuestSysctl(nil, []string{"net.ipv4.tcp_rmem=4096 4096 4096"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "only inside a wanlab VM") {
		t.Errorf("vm sysctl --set on the host: %v", err)
	}
	if err := GuestStop(1); err == nil || !strings.Contains(err.Error(), "only inside a wanlab VM") {
		t.Errorf("vm stop on the host: %v", err)
	}
}
