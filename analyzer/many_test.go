package analyzer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
)

// TestFinishedConnectionsLeave checks that connections are retired as
// they finish: with 25 open at a time, the analyzer tracks at most those
// plus the ones closed within the linger, and hands every connection to
// OnFinish once, in order, with the totals the one-shot analysis gives.
func TestFinishedConnectionsLeave(t *testing.T) {
	const conns = 3000
	cfg := synth.ManyConfig{Conns: conns, Concurrent: 25}
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	capture := buf.Bytes()

	whole, err := AnalyzeReader(mustReader(t, capture), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Connections) != conns {
		t.Fatalf("%d connections, want %d", len(whole.Connections), conns)
	}

	var got []*Connection
	a := New(Options{NoSeries: true, FinishedPoints: -1, OnFinish: func(c *Connection) { got = append(got, c) }})
	r := mustReader(t, capture)
	maxLive, maxPending := 0, 0
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(f.Link, f.Data, f.WireLen, f.Timestamp)
		maxLive, maxPending = max(maxLive, len(a.live)), max(maxPending, len(a.unfinished))
	}
	res := a.Finish()
	// 60 ms connections starting every 2.4 ms, each kept for the linger
	// and up to one sweep interval after its last packet.
	every := 60*time.Millisecond/25 + time.Microsecond
	bound := int((closedLinger+time.Duration(sweepEvery)+60*time.Millisecond)/every) + 2
	if maxLive > bound || maxPending > bound {
		t.Errorf("tracked up to %d connections, %d not yet handed over; want at most %d", maxLive, maxPending, bound)
	}
	if len(res.Connections) != 0 {
		t.Errorf("Result lists %d connections with OnFinish set", len(res.Connections))
	}
	if len(got) != conns {
		t.Fatalf("OnFinish got %d connections, want %d", len(got), conns)
	}
	for i, c := range got {
		w := whole.Connections[i]
		if c.Index != i+1 || c.State != "closed" {
			t.Fatalf("connection %d: index %d, state %s", i+1, c.Index, c.State)
		}
		cj, _ := json.Marshal(c)
		wj, _ := json.Marshal(w)
		if !bytes.Equal(cj, wj) {
			t.Fatalf("connection %d differs when streamed:\n%s\n%s", i+1, cj, wj)
		}
	}
}

// TestConcurrentFinish checks that with ConcurrentFinish every connection
// still reaches OnFinish once, in order, diagnosed as the one-shot
// analysis diagnoses it, and that Finish returns after the last (run it
// with -race: the finisher's goroutine must not share state with the
// analysis).
func TestConcurrentFinish(t *testing.T) {
	const conns = 2000
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, synth.ManyConfig{Conns: conns, Concurrent: 40}); err != nil {
		t.Fatal(err)
	}
	whole, err := AnalyzeReader(mustReader(t, buf.Bytes()), Options{NoSeries: true, FinishedPoints: -1})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	res, err := AnalyzeReader(mustReader(t, buf.Bytes()), Options{NoSeries: true, FinishedPoints: -1, ConcurrentFinish: true,
		OnFinish: func(c *Connection) {
			j, err := json.Marshal(c)
			if err != nil {
				t.Error(err)
			}
			got = append(got, j)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != conns || len(res.Connections) != 0 {
		t.Fatalf("OnFinish got %d connections, Result lists %d; want %d and 0", len(got), len(res.Connections), conns)
	}
	for i, j := range got {
		w, _ := json.Marshal(whole.Connections[i])
		if !bytes.Equal(j, w) {
			t.Fatalf("connection %d differs when finished concurrently:\n%s\n%s", i+1, j, w)
		}
	}
	if res.Frames != whole.Frames || res.TCPPackets != whole.TCPPackets {
		t.Errorf("frames %d/%d, want %d/%d", res.Frames, res.TCPPackets, whole.Frames, whole.TCPPackets)
	}
}

// corpusConnections analyzes the committed captures, with scenarios the
// agreement tests' synthetic ones, and a capture of many short
// connections (many, 10 open at a time): the connections the output
// writers are checked on.
func corpusConnections(t *testing.T, scenarios bool, many int) []*Connection {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.pcap"))
	if scenarios {
		for _, sc := range agreementScenarios {
			p, _ := writeSynth(t, sc.cfg)
			paths = append(paths, p)
		}
	}
	var conns []*Connection
	for _, p := range paths {
		res, err := AnalyzeFile(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, res.Connections...)
	}
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, synth.ManyConfig{Conns: many, Concurrent: 10}); err != nil {
		t.Fatal(err)
	}
	res, err := AnalyzeReader(mustReader(t, buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return append(conns, res.Connections...)
}

// shortConnection is the first of a capture of short HTTP-like
// connections, for the benchmarks of what is written per connection.
func shortConnection(b *testing.B) *Connection {
	b.Helper()
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, synth.ManyConfig{Conns: 20, Concurrent: 5}); err != nil {
		b.Fatal(err)
	}
	r, err := AnalyzeStream(&buf, "many", Options{})
	if err != nil {
		b.Fatal(err)
	}
	return r.Connections[0]
}

func mustReader(t *testing.T, b []byte) *pcapfile.Reader {
	t.Helper()
	r, err := pcapfile.NewReader(bytes.NewReader(b), "many")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRetiredSeriesReduced checks that a connection finished before the
// end of the capture keeps its series within the FinishedPoints budget.
func TestRetiredSeriesReduced(t *testing.T) {
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, synth.ManyConfig{Conns: 400, Concurrent: 5}); err != nil {
		t.Fatal(err)
	}
	res, err := AnalyzeReader(mustReader(t, buf.Bytes()), Options{FinishedPoints: 2})
	if err != nil {
		t.Fatal(err)
	}
	first := res.Connections[0].Directions[1].Series
	if len(first.Segments.Points) == 0 || len(first.Segments.Points) > 2 {
		t.Errorf("retired connection's segment series has %d points, want 1..2", len(first.Segments.Points))
	}
	var n int
	for _, p := range first.Throughput.Points {
		n += p.N
	}
	if n != 4 {
		t.Errorf("retired throughput series holds %d segments, want 4", n)
	}
}

// TestWantedDiagnosesOnlyThose: with Options.Wanted (analyze --flow) only
// the wanted connections are diagnosed, streamed or not.
func TestWantedDiagnosesOnlyThose(t *testing.T) {
	var capture bytes.Buffer
	if _, err := synth.WriteMany(&capture, synth.ManyConfig{Conns: 300}); err != nil {
		t.Fatal(err)
	}
	wanted := func(c *Connection) bool { return c.Index%100 == 7 }
	check := func(name string, conns []*Connection) {
		t.Helper()
		diagnosed := 0
		for _, c := range conns {
			if (c.Diagnosis != nil) != wanted(c) {
				t.Errorf("%s: connection %d: diagnosis %v, wanted %v", name, c.Index, c.Diagnosis, wanted(c))
			}
			if c.Diagnosis != nil {
				diagnosed++
			}
		}
		if len(conns) != 300 || diagnosed != 3 {
			t.Errorf("%s: %d connections, %d diagnosed; want 300 and 3", name, len(conns), diagnosed)
		}
	}
	res, err := AnalyzeStream(bytes.NewReader(capture.Bytes()), "many", Options{Wanted: wanted})
	if err != nil {
		t.Fatal(err)
	}
	check("in memory", res.Connections)
	for _, concurrent := range []bool{false, true} {
		var mu sync.Mutex
		var got []*Connection
		opts := Options{Wanted: wanted, ConcurrentFinish: concurrent, OnFinish: func(c *Connection) {
			mu.Lock()
			got = append(got, c)
			mu.Unlock()
		}}
		if _, err := AnalyzeStream(bytes.NewReader(capture.Bytes()), "many", opts); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("OnFinish, concurrent %v", concurrent), got)
	}
}
