package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// A netem stage holds every packet it delays in one queue of at most
// limit packets (1000 unless "limit" says; q_netem.c's tfifo): a packet
// that arrives while it is full is dropped. The packets inside at once
// are the packet rate reaching the stage times how long each stays, so
// `delay 20ms` passes at most 50,000 packets a second and drops the rest
// of a faster flow, silently, in the kernel as in the engine. This file
// says so once, with the limit that holds the load.

// AssumedLineRate is the rate a link is assumed to carry when its spec has
// no rate stage (tbf, netem's rate, htb's ceil): a flood at gigabit
// Ethernet's line rate, the common link a proxy's interfaces have.
const AssumedLineRate units.Rate = 1_000_000_000

// FullPacket is the size a rate is turned into packets with: a full
// Ethernet payload, what a bulk transfer sends.
const FullPacket units.Size = 1500

// OfferedLoad is what reaches a pipeline: the packet rate, and how that
// rate was chosen (said in the warning, so a reader can judge it).
type OfferedLoad struct {
	PPS   float64
	Basis string
	// Closed is true when the senders adapt to the path (TCP): they
	// settle at the slowest rate of the pipeline wherever it stands, so a
	// rate stage after the delay limits what enters it too. An open load
	// (simulate's evenly spaced packets) is slowed only by the rate
	// stages before a delay.
	Closed bool
}

// LinkLoad is the load a proxy direction is assumed to carry with spec s:
// TCP at the slowest rate of s, in FullPacket packets, or a flood at
// AssumedLineRate when s has no rate; ceil (0: none) is an htb class's.
func LinkLoad(s *spec.Spec, ceil units.Rate) OfferedLoad {
	rate, what := slowestRate(s, 0, len(s.Stages))
	if ceil > 0 && (rate == 0 || ceil < rate) {
		rate, what = ceil, "htb ceil"
	}
	if rate == 0 {
		return OfferedLoad{PPS: packetRate(AssumedLineRate), Closed: true,
			Basis: fmt.Sprintf("the spec has no rate, so a flood at %s line rate of %d-byte packets is assumed",
				AssumedLineRate, uint64(FullPacket))}
	}
	return OfferedLoad{PPS: packetRate(rate), Closed: true,
		Basis: fmt.Sprintf("TCP filling the link at its %s %s in %d-byte packets", what, rate, uint64(FullPacket))}
}

// SimLoad is simulate's load: pps evenly spaced packets of size bytes.
func SimLoad(pps float64, size int) OfferedLoad {
	return OfferedLoad{PPS: pps, Basis: fmt.Sprintf("simulate's %s packets/s of %d bytes", units.Sprintf("%.3g", pps), size)}
}

// DelayLimitWarnings returns one warning for each netem stage of s whose
// limit cannot hold the packets inside its delay under load: the packets
// reaching it per second (load.PPS, slowed by rate stages as
// OfferedLoad.Closed says) times its delay plus jitter.
func DelayLimitWarnings(s *spec.Spec, load OfferedLoad) []string {
	if s == nil || load.PPS <= 0 {
		return nil
	}
	var w []string
	for i, st := range s.Stages {
		n, ok := st.(*spec.Netem)
		if !ok || n.Latency <= 0 {
			continue
		}
		pps := load.PPS
		upto := i
		if load.Closed {
			upto = len(s.Stages)
		}
		if rate, _ := slowestRate(s, 0, upto); rate > 0 {
			pps = math.Min(pps, packetRate(rate))
		}
		stay := n.Latency + absDuration(n.Jitter)
		inside := math.Ceil(pps * stay.Seconds())
		limit := n.QueueLimit()
		if inside <= float64(limit) {
			continue
		}
		fix := units.Sprintf("write 'limit %.0f' or more", inside)
		if inside > math.MaxUint32 {
			fix = fmt.Sprintf("no limit holds it (netem's largest is %d): shorten the delay", uint32(math.MaxUint32))
		}
		w = append(w, units.Sprintf("%s: its limit of %d packets holds %s of %.3g packets/s; at %.3g packets/s (%s) "+
			"about %.3g packets are inside at once and the rest are dropped, as netem drops them: %s",
			delayText(n), limit, units.FormatDuration(stay), float64(limit)/stay.Seconds(), pps, load.Basis, inside, fix))
	}
	return w
}

// DelayLimitWarningsOfClasses is DelayLimitWarnings for a proxy direction
// carrying cs: each leaf under LinkLoad with its class's ceil.
func DelayLimitWarningsOfClasses(cs *spec.Classes) []string {
	if s, plain := cs.Pipeline(); plain {
		if s == nil { // no impairment
			return nil
		}
		return DelayLimitWarnings(s, LinkLoad(s, 0))
	}
	var w []string
	for _, c := range cs.LeafClasses() {
		if c.Spec == nil {
			continue
		}
		var ceil units.Rate
		if c.HTB != nil {
			ceil = max(c.HTB.Ceil, c.HTB.Rate)
		}
		for _, line := range DelayLimitWarnings(c.Spec, LinkLoad(c.Spec, ceil)) {
			w = append(w, "leaf "+c.ID+": "+line)
		}
	}
	return w
}

// slowestRate is the lowest rate of the stages of s in [from, to) that
// limit one (tbf's rate, netem's rate), with its name; 0 when none does.
func slowestRate(s *spec.Spec, from, to int) (units.Rate, string) {
	var rate units.Rate
	var what string
	for _, st := range s.Stages[from:to] {
		var r units.Rate
		var name string
		switch x := st.(type) {
		case *spec.TBF:
			r, name = x.Rate, "tbf rate"
		case *spec.Netem:
			r, name = x.Rate, "netem rate"
		}
		if r > 0 && (rate == 0 || r < rate) {
			rate, what = r, name
		}
	}
	return rate, what
}

// packetRate is rate in FullPacket packets per second.
func packetRate(r units.Rate) float64 { return r.BytesPerSecond() / float64(FullPacket) }

// delayText is the stage's delay as typed: "delay 20ms" or "delay 20ms 5ms".
func delayText(n *spec.Netem) string {
	s := "delay " + units.FormatDuration(n.Latency)
	if n.Jitter != 0 {
		s += " " + units.FormatDuration(absDuration(n.Jitter))
	}
	return s
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
