package analyzer

import (
	"reflect"
	"testing"
)

// flights feeds r one flight per round trip of rtt ns: segs[i] segments of
// mss bytes in round i (0: a silent round), the receiver offering win.
func flights(r *roundLog, rtt int64, win int64, segs []int, resent map[int]bool) {
	const mss = 1448
	for i, n := range segs {
		r.window(int64(i)*rtt, win)
		for k := 0; k < n; k++ {
			t := int64(i)*rtt + int64(k)*1000
			rs := resent[i] && k == 0
			nb := int64(mss)
			if rs {
				nb = 0
			}
			r.add(t, 0, rtt, 0, nb, rs)
		}
	}
}

// TestRoundsWindowAtEitherEnd: a receiver whose window grows with its
// buffer (autotuning doubles it every round trip) and a sender that fills
// it. Each flight is the window offered a round trip before it arrived:
// near the sender the ACKs carrying that window come in just before the
// flight leaves, near the receiver they left a round trip before the
// flight arrives. Both ends class the same rounds as the window's.
func TestRoundsWindowAtEitherEnd(t *testing.T) {
	const rtt, mss = 20_000_000, 1448
	win := []int64{10 * mss, 20 * mss, 40 * mss, 80 * mss, 160 * mss, 320 * mss, 640 * mss}
	var counts [2]int
	for end, lag := range []int64{0, rtt} {
		var r roundLog
		for i := 1; i < len(win); i++ {
			start := int64(i) * rtt
			if lag == rtt && i == 1 {
				// The receiver's first window, offered a round trip
				// before the first flight arrives.
				r.window(start-rtt/2, win[0])
			}
			for k := int64(0); k < win[i-1]/mss; k++ {
				if lag == 0 {
					// Near the sender: each ACK offering win[i-1]
					// releases a segment as it arrives.
					r.window(start+k*1000, win[i-1])
				}
				r.add(start+k*1000, rtt, rtt, lag, mss, false)
			}
			if lag == rtt {
				// Near the receiver: the flight arrives, then the
				// receiver's ACKs offer the doubled window, which the
				// next flight fills a round trip later.
				r.window(start+win[i-1]/mss*1000+1000, win[i])
			}
		}
		r.periodList(rtt)
		counts[end] = int(r.windowRounds)
	}
	if counts[0] != len(win)-1 || counts[1] != len(win)-1 {
		t.Errorf("window rounds near the sender %d, near the receiver %d: want all %d", counts[0], counts[1], len(win)-1)
	}
}

func TestRoundsRampAndPeriods(t *testing.T) {
	const rtt = 20_000_000 // 20 ms
	// A slow start of 10, 20, 40 segments that ended with the data.
	var ss roundLog
	flights(&ss, rtt, 1<<20, []int{10, 20, 40, 13}, nil)
	if rp := ss.ramp(); !rp.Growing || rp.Rounds != 4 || rp.InitialBytes != 10*1448 || rp.PeakRound != 2 {
		t.Errorf("slow start: %+v", rp)
	}
	// The window opening, then held at a 64 KiB window for 6 rounds:
	// slow start, then the receive window.
	var rw roundLog
	flights(&rw, rtt, 45*1448, []int{4, 8, 16, 32, 45, 45, 45, 45, 45, 45, 3}, nil)
	rp := rw.ramp()
	if rp.Growing || rp.Flat < 5 {
		t.Errorf("window plateau: %+v", rp)
	}
	got := namePeriods(rw.periodList(rtt), LimitReceiveWindow)
	var names []string
	for _, p := range got {
		names = append(names, p.Limit)
	}
	if want := []string{LimitSlowStart, LimitReceiveWindow}; !reflect.DeepEqual(names, want) {
		t.Errorf("periods %+v, want %v", got, want)
	}
	// A request/response connection: bursts of 8 segments with 5 silent
	// round trips between them are the application's, and a loss round
	// trip after the silence of its timeout is the loss's.
	var app roundLog
	segs := []int{}
	for range 4 {
		segs = append(segs, 8, 8, 8, 0, 0, 0, 0, 0)
	}
	flights(&app, rtt, 1<<20, segs, nil)
	got = namePeriods(app.periodList(rtt), LimitCongestion)
	if len(got) < 4 || got[1].Limit != LimitApplication || got[0].Limit != LimitCongestion {
		t.Errorf("request/response periods %+v", got)
	}
	var rto roundLog
	flights(&rto, rtt, 1<<20, []int{5, 10, 20, 40, 40, 40, 40, 40, 0, 0, 0, 0, 5, 5, 5, 5}, map[int]bool{12: true})
	got = namePeriods(rto.periodList(rtt), LimitCongestion)
	names = names[:0]
	for _, p := range got {
		names = append(names, p.Limit)
	}
	if want := []string{LimitSlowStart, LimitCongestion, LimitLoss, LimitCongestion}; !reflect.DeepEqual(names, want) {
		t.Errorf("a timeout's periods %+v, want %v", got, want)
	}
	// One limit throughout: no periods.
	var flat roundLog
	flights(&flat, rtt, 1<<20, []int{8, 8, 8, 8, 8, 8, 8, 8}, nil)
	if got := namePeriods(flat.periodList(rtt), LimitSendBuffer); got != nil {
		t.Errorf("one limit: periods %+v, want none", got)
	}
}
