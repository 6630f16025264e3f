package fit

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/wanlab/wanlab/analyzer"
)

// MaxOthersListed bounds the other connections a fit lists (Result.Others,
// the text's "other connections"): a capture of 600,000 connections
// printed a 29.5 MB line. Those with the most data are kept; the rest are
// counted (Result.OthersUnlisted).
const MaxOthersListed = 20

// listOthers keeps the MaxOthersListed connections of others with the
// most data, in capture order, and counts the rest.
func listOthers(others []ConnInfo) ([]ConnInfo, int) {
	if len(others) <= MaxOthersListed {
		return others, 0
	}
	kept := slices.Clone(others)
	slices.SortStableFunc(kept, func(a, b ConnInfo) int { return cmp.Compare(b.Bytes, a.Bytes) })
	kept = kept[:MaxOthersListed]
	slices.SortFunc(kept, func(a, b ConnInfo) int { return cmp.Compare(a.Index, b.Index) })
	return kept, len(others) - MaxOthersListed
}

// readerNotes are the notes (Result.ReaderWarnings) a fit takes from how its capture was read:
// a reader that gave up before the end (the fit is of what came before),
// and record headers it found broken. Nothing is fitted silently on part
// of a file.
func readerNotes(res *analyzer.Result, maxOpen int) []string {
	var notes []string
	if res.FinishedEarly > 0 {
		if maxOpen <= 0 {
			maxOpen = analyzer.DefaultMaxOpen
		}
		notes = append(notes, fmt.Sprintf("more than %d connections open at once (the analysis's budget; --max-open-connections raises it): %d were finished early, at their last packet before it was reached",
			maxOpen, res.FinishedEarly))
	}
	if res.ReadStopped != "" {
		notes = append(notes, fmt.Sprintf("read in part, fitted on its first %d frames: %s", res.Frames, res.ReadStopped))
	}
	if n := len(res.BadRecords); n > 0 {
		w := res.BadRecords[0]
		notes = append(notes, fmt.Sprintf("%d broken record headers (analyze lists them), the first at offset %d: %s", n, w.Offset, w.Problem))
	}
	return notes
}

// connSummary is what a fit keeps of each connection of its capture
// besides the one it fits: about 150 bytes.
type connSummary struct {
	info   ConnInfo
	server netip.AddrPort
	// requests counts the client's data segments (a request-response
	// load's requests, RequestResponse).
	requests int
}

// captureConns gathers a capture's connections as the analyzer finishes
// them (Options.OnFinish): the one to fit, the one with the most data
// among those sel matches (the first of them on a tie), whole, and a
// summary of every one with data. Memory follows the connections open at
// once, not all the capture's.
type captureConns struct {
	sel       analyzer.FlowSelector
	best      *analyzer.Connection
	n         int
	summaries []connSummary
}

// wanted says c would be the one to fit so far: it alone is diagnosed
// (Options.Wanted, asked just before add is given c).
func (cc *captureConns) wanted(c *analyzer.Connection) bool {
	return cc.sel.Match(c) && c.UniqueBytes() > 0 && (cc.best == nil || c.UniqueBytes() > cc.best.UniqueBytes())
}

func (cc *captureConns) add(c *analyzer.Connection) {
	cc.n++
	req := 0
	if d := c.Directions[0]; d != nil {
		req = d.DataPackets
	}
	if c.UniqueBytes() > 0 || req > 0 {
		cc.summaries = append(cc.summaries, connSummary{info: connInfo(c), server: c.Server, requests: req})
	}
	if cc.wanted(c) {
		cc.best = c
	}
}
