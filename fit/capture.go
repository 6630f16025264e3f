package fit

import (
	"cmp"
	"fmt"
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
func readerNotes(res *analyzer.Result) []string {
	var notes []string
	if res.ReadStopped != "" {
		notes = append(notes, fmt.Sprintf("read in part, fitted on its first %d frames: %s", res.Frames, res.ReadStopped))
	}
	if n := len(res.BadRecords); n > 0 {
		w := res.BadRecords[0]
		notes = append(notes, fmt.Sprintf("%d broken record headers (analyze lists them), the first at offset %d: %s", n, w.Offset, w.Problem))
	}
	return notes
}
