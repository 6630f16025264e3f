package analyzer

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestConnectionJSONMatchesEncodingJSON checks the connection encoder
// byte for byte against encoding/json on every committed capture, the
// synthetic scenarios and a capture of many short connections, and on
// strings that need escaping.
func TestConnectionJSONMatchesEncodingJSON(t *testing.T) {
	conns := corpusConnections(t, true, 50)
	odd := *conns[0]
	odd.State = "<a & b> \"q\" \\ \n\t\x01 \u2028 é \xff"
	odd.Diagnosis = &Diagnosis{Evidence: []string{}, RateBps: 1e-7, PredictedBps: 1e22}
	odd.Directions[0] = nil
	conns = append(conns, &odd)
	for _, c := range conns {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendConnectionJSON(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("connection %d:\n got %s\nwant %s", c.Index, got, want)
		}
	}
}

func BenchmarkConnectionJSON(b *testing.B) {
	c := shortConnection(b)
	out, _ := appendConnectionJSON(nil, c)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	var e jsonState // as a JSONWriter keeps it
	for b.Loop() {
		out, _ = e.appendConnection(out[:0], c)
	}
}
