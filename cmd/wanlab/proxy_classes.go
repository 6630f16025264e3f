package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/wanlab/wanlab/tc/htb"
	"github.com/wanlab/wanlab/units"
)

// writeHTBStats prints a direction's htb tree counters (engine snapshot's
// Scheduler: []htb.ClassStats in process, its JSON form from the control
// API), one row per class: what it sent, borrowed and lent, and what
// waits in it.
func writeHTBStats(w io.Writer, sched any) error {
	if sched == nil {
		return nil
	}
	stats, ok := sched.([]htb.ClassStats)
	if !ok {
		b, err := json.Marshal(sched)
		if err != nil || json.Unmarshal(b, &stats) != nil || len(stats) == 0 {
			return nil // not an htb tree
		}
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
