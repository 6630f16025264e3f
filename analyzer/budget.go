package analyzer

import (
	"fmt"
	"slices"
)

// DefaultMaxOpen is the connections an analysis holds open at once unless
// Options.MaxOpen says otherwise: about 200 MB of their state
// (ConnectionStateBytes each). A finished connection keeps only its
// summary.
const DefaultMaxOpen = 20_000

// ConnectionStateBytes is the measured size of an open connection's state
// (both directions' sequence tracking, RTT sampling, histograms): the
// slope of `wanlab fit`'s peak RSS over --max-open-connections on a
// capture of 200,000 connections open at once (docs/security.md).
const ConnectionStateBytes = 10 << 10

// shedShare is the share of the open connections finished at once when
// the budget is reached: a quarter, so that shedding (a sort of the open
// connections) costs O(log n) per new connection.
const shedShare = 4

// overBudget reports whether a new connection would take the analysis
// past its budget: open connections, or (with OnFinish) finished ones
// waiting behind an open one for their turn.
func (a *Analyzer) overBudget() bool {
	return len(a.live) >= a.opts.MaxOpen || a.opts.OnFinish != nil && len(a.unfinished) >= a.opts.MaxOpen
}

// shed finishes early the quarter of the open connections silent longest
// (bounded mode), and with OnFinish the open ones at the head of the
// order that hold finished ones back: each keeps what it had, and a later
// packet of its 4-tuple starts a new connection. Result.FinishedEarly
// counts them; Finish's warning names the budget and the flag.
func (a *Analyzer) shed() {
	open := slices.Clone(a.live)
	slices.SortStableFunc(open, func(x, y *Connection) int {
		switch {
		case x.lastT < y.lastT:
			return -1
		case x.lastT > y.lastT:
			return 1
		}
		return 0
	})
	if len(a.live) >= a.opts.MaxOpen {
		for _, c := range open[:len(open)/shedShare+1] {
			a.finishEarly(c)
		}
	}
	if a.opts.OnFinish != nil && len(a.unfinished) >= a.opts.MaxOpen {
		for _, c := range a.unfinished[:len(a.unfinished)/shedShare+1] {
			a.finishEarly(c)
		}
	}
	live := a.live[:0]
	for _, c := range a.live {
		if !c.finished {
			live = append(live, c)
		}
	}
	clear(a.live[len(live):])
	a.live = live
	a.recent = [2]recentTuple{}
	a.emitFinished()
}

func (a *Analyzer) finishEarly(c *Connection) {
	if c.finished {
		return
	}
	a.retire(c)
	a.res.FinishedEarly++
}

// budgetWarning is Finish's line on a capture past the budget.
func (a *Analyzer) budgetWarning() string {
	return fmt.Sprintf("more than %d connections open at once (the analysis's budget; --max-open-connections raises it): %d were finished early, at their last packet before the budget was reached (a later packet starts a new connection)",
		a.opts.MaxOpen, a.res.FinishedEarly)
}
