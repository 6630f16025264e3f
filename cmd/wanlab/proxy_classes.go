package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/units"
)

// writeHTBStats prints a direction's htb tree counters (the engine
// snapshot's Scheduler), one row per class: what it sent, borrowed and
// lent, and what waits in it.
func writeHTBStats(w io.Writer, stats []engine.TreeClass) error {
	if len(stats) == 0 {
		return nil
	}
	fmt.Fprintln(w, "  htb tree:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "    class\tparent\tsent\tborrowed\tlent\tqueued\tdropped\tmode\t")
	for _, s := range stats {
		parent := s.Parent
		if parent == "" {
			parent = "root"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t\n", s.ID, parent, units.Size(s.Bytes).Human(),
			units.Size(s.BorrowedBytes).Human(), units.Size(s.LentBytes).Human(), s.QueuePackets, s.DroppedQueue, s.Mode)
	}
	return tw.Flush()
}
