package analyzer

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// rawTCP is an IPv4/TCP packet from 10.1.x.y:port to 10.0.0.2:80 (or
// back), of payload bytes on the wire (not captured).
func rawTCP(client uint32, port uint16, toServer bool, seq, ack uint32, flags uint8, payload int) ([]byte, int) {
	p := make([]byte, 40)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(40+payload))
	p[8], p[9] = 64, 6
	c := []byte{10, 1, byte(client >> 8), byte(client)}
	s := []byte{10, 0, 0, 2}
	sp, dp := port, uint16(80)
	if !toServer {
		c, s = s, c
		sp, dp = dp, sp
	}
	copy(p[12:], c)
	copy(p[16:], s)
	binary.BigEndian.PutUint16(p[20:], sp)
	binary.BigEndian.PutUint16(p[22:], dp)
	binary.BigEndian.PutUint32(p[24:], seq)
	binary.BigEndian.PutUint32(p[28:], ack)
	p[32] = 5 << 4
	p[33] = flags
	binary.BigEndian.PutUint16(p[34:], 65535)
	return p, 40 + payload
}

// TestOpenConnectionsBudget: past Options.MaxOpen connections open at
// once, those silent longest are finished early: the analysis never holds
// more open than its budget (nor, with OnFinish, more waiting), every
// connection is still reported once, and a warning names the budget and
// the flag that raises it.
func TestOpenConnectionsBudget(t *testing.T) {
	const budget, conns = 100, 1000
	for _, streaming := range []bool{false, true} {
		reported := 0
		opts := Options{NoSeries: true, MaxOpen: budget}
		if streaming {
			opts.OnFinish = func(*Connection) { reported++ }
		}
		a := New(opts)
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		most := 0
		for i := range conns {
			for _, p := range []struct {
				toServer bool
				seq, ack uint32
				flags    uint8
				payload  int
			}{
				{true, 1000, 0, 0x02, 0}, {false, 5000, 1001, 0x12, 0}, {true, 1001, 5001, 0x10, 0},
				{false, 5001, 1001, 0x10, 1000}, {true, 1001, 6001, 0x10, 0},
			} {
				data, wire := rawTCP(uint32(i), uint16(1024+i), p.toServer, p.seq, p.ack, p.flags, p.payload)
				a.Add(decode.LinkRaw, data, wire, at)
				at = at.Add(5 * time.Microsecond)
			}
			most = max(most, len(a.live), len(a.unfinished))
		}
		res := a.Finish()
		if !streaming {
			reported = len(res.Connections)
		}
		if most > budget {
			t.Errorf("streaming %v: %d connections held at once, over the budget of %d", streaming, most, budget)
		}
		if reported != conns || res.FinishedEarly < conns-budget {
			t.Errorf("streaming %v: %d connections reported of %d, %d finished early", streaming, reported, conns, res.FinishedEarly)
		}
		warned := false
		for _, w := range res.Warnings {
			warned = warned || strings.Contains(w, "more than 100 connections open at once") && strings.Contains(w, "--max-open-connections")
		}
		if !warned {
			t.Errorf("streaming %v: no warning naming the budget and its flag: %q", streaming, res.Warnings)
		}
	}
}
