package engine

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// SimTree is what a run of Flows measured per class: the tree's classes,
// or a pipeline's one. Rates are over the measured window (after Warmup),
// in bits/s of IP bytes. The JSON field names are a contract with
// `wanlab simulate --json` users.
type SimTree struct {
	Classes    string     `json:"classes"`
	Flows      []string   `json:"flows"`
	DurationMs float64    `json:"duration_ms"`
	WarmupMs   float64    `json:"warmup_ms"`
	Seed       uint64     `json:"seed"`
	Result     []SimClass `json:"result"`
}

// SimClass is one class's share of a run of Flows.
type SimClass struct {
	ID          string  `json:"id"`
	Parent      string  `json:"parent,omitempty"`
	Leaf        bool    `json:"leaf"`
	Rate        float64 `json:"rate_bps"`
	Ceil        float64 `json:"ceil_bps"`
	OfferedBps  float64 `json:"offered_bps"`
	RealizedBps float64 `json:"realized_bps"`
	// BorrowedBytes were sent above the class's rate on a parent's
	// spare tokens (over the whole run).
	BorrowedBytes uint64 `json:"borrowed_bytes"`
	LentBytes     uint64 `json:"lent_bytes"`
	// Drops by reason over the whole run (leaf classes): loss (netem),
	// queue (a leaf or netem/tbf queue full), oversize (tbf).
	Drops Drops `json:"drops"`
	// DelayMeanMs is the mean time from arrival to departure of the
	// class's packets.
	DelayMeanMs float64 `json:"delay_mean_ms"`
	QueueMax    uint64  `json:"queue_max_packets"`
}

// treeReport sums the engine classes' counts (in the order of classes,
// the engine's) into a row per class: first the engine classes that are
// no class of the tree (the direct class, a pipeline's one), then the
// tree's, each with the counts of the leaves under it.
func treeReport(cfg SimConfig, classes []ClassSpec, counts []classCounts, stats []TreeClass) *SimTree {
	window := float64(cfg.Duration-cfg.Warmup) / 1e9
	res := &SimTree{DurationMs: float64(cfg.Duration) / 1e6, WarmupMs: float64(cfg.Warmup) / 1e6, Seed: cfg.Seed}
	for _, f := range cfg.Flows {
		res.Flows = append(res.Flows, f.String())
	}
	add := func(sc SimClass, engineClasses []int) {
		var dsum float64
		var dn uint64
		for _, ci := range engineClasses {
			n := counts[ci]
			sc.OfferedBps += float64(n.OfferedBytes) * 8 / window
			sc.RealizedBps += float64(n.RealizedBytes) * 8 / window
			sc.Drops.Add(n.Drops)
			dsum += n.DelaySumNs
			dn += n.Departed
			sc.QueueMax = max(sc.QueueMax, n.QueueMax)
		}
		if dn > 0 {
			sc.DelayMeanMs = dsum / float64(dn) / 1e6
		}
		res.Result = append(res.Result, sc)
	}
	cs := cfg.Impairment.Classes
	if s, plain := cs.Pipeline(); plain {
		res.Classes = s.String()
		add(SimClass{ID: "default", Leaf: true}, []int{0})
		return res
	}
	res.Classes = cs.String()
	byName := map[string]int{}
	for i, c := range classes {
		byName[c.Name] = i
	}
	tree := make(map[string]*spec.Class, len(cs.Classes))
	for i := range cs.Classes {
		tree[cs.Classes[i].ID] = &cs.Classes[i]
	}
	for i, c := range classes {
		if tree[c.Name] == nil {
			add(SimClass{ID: c.Name, Leaf: true}, []int{i})
		}
	}
	under := leavesUnder(cs, tree, byName)
	if stats != nil {
		for _, st := range stats {
			c := tree[st.ID]
			sc := SimClass{ID: st.ID, Parent: st.Parent, Leaf: st.Leaf, BorrowedBytes: st.BorrowedBytes, LentBytes: st.LentBytes,
				Rate: float64(c.HTB.Rate), Ceil: float64(max(c.HTB.Ceil, c.HTB.Rate))}
			add(sc, under[st.ID])
		}
		return res
	}
	leaves := map[string]bool{}
	for _, l := range cs.Leaves() {
		leaves[l] = true
	}
	for _, c := range cs.Classes {
		add(SimClass{ID: c.ID, Parent: c.Parent, Leaf: leaves[c.ID]}, under[c.ID])
	}
	return res
}

// leavesUnder maps each class to the engine classes of its leaves (a leaf
// to itself), in the order the leaves are written: one walk up from each
// leaf, so a tree of n classes and depth d costs n*d, not n² per class.
func leavesUnder(cs *spec.Classes, tree map[string]*spec.Class, byName map[string]int) map[string][]int {
	out := map[string][]int{}
	for _, l := range cs.Leaves() {
		for x := l; x != ""; {
			out[x] = append(out[x], byName[l])
			c := tree[x]
			if c == nil {
				break
			}
			x = c.Parent
		}
	}
	return out
}

// writeText prints the classes as a table.
func (r *SimTree) writeText(w io.Writer) error {
	fmt.Fprintf(w, "classes: %s\n", r.Classes)
	for _, f := range r.Flows {
		fmt.Fprintf(w, "flow:    %s\n", f)
	}
	fmt.Fprintf(w, "virtual time %s, rates measured after %s\n\n", units.FormatDuration(time.Duration(r.DurationMs*1e6)), units.FormatDuration(time.Duration(r.WarmupMs*1e6)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tparent\trate\tceil\toffered\trealized\tborrowed\tlent\tdrops loss/queue/oversize\tdelay mean\tqueue max\t")
	human := func(bps float64) string {
		if bps == 0 {
			return "-"
		}
		return units.Rate(math.Round(bps)).Human()
	}
	for _, c := range r.Result {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d/%d\t%.2fms\t%d\t\n", c.ID, c.Parent, human(c.Rate), human(c.Ceil),
			human(c.OfferedBps), human(c.RealizedBps), units.Size(c.BorrowedBytes).Human(), units.Size(c.LentBytes).Human(),
			c.Drops.Loss, c.Drops.Queue, c.Drops.Oversize, c.DelayMeanMs, c.QueueMax)
	}
	return tw.Flush()
}
