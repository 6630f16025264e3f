package kernel

import (
	"errors"
	"fmt"
	"sort"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/tc/spec"
)

// decodeTree reads a plain htb tree back as a class set: the htb root's
// default and r2q, its classes (burst, cburst and quantum left out where
// they are what tc would choose) and each leaf's netem/tbf chain. A tree
// with filters (which are not read back) or with anything a class set
// cannot say is refused.
func decodeTree(clock Clock, ifindex int, tree []qdisc) (*spec.Classes, error) {
	r, ok := root(tree)
	if !ok || r.Kind != "htb" {
		return nil, errors.New("not an htb tree")
	}
	_, rd, err := parmsOf(r.Options, "htb options", tcaHTBInit, "TCA_HTB_INIT")
	if err != nil {
		return nil, err
	}
	rd.u32() // version
	r2q, def := rd.u32(), rd.u32()
	if rd.err != nil {
		return nil, rd.err
	}
	major := uint16(r.Handle >> 16)
	cs := &spec.Classes{}
	if r2q != 10 {
		cs.R2Q = r2q
	}
	if def != 0 {
		cs.Default = spec.MakeHandle(major, uint16(def)).String()
	}
	parents := []uint32{r.Handle}
	depth := map[uint32]int{r.Handle: 0}
	var classes []qdisc
	for _, q := range tree {
		if q.Class && q.Kind == "htb" {
			classes = append(classes, q)
			parents = append(parents, q.Handle)
		}
	}
	var depthOf func(q qdisc) int
	depthOf = func(q qdisc) int {
		if d, ok := depth[q.Handle]; ok {
			return d
		}
		depth[q.Handle] = len(classes) // a loop ends here
		d := 1
		for _, p := range classes {
			if p.Handle == q.Parent {
				d = depthOf(p) + 1
			}
		}
		depth[q.Handle] = d
		return d
	}
	// Parents before children (apply makes the classes in this order).
	sort.SliceStable(classes, func(i, j int) bool {
		di, dj := depthOf(classes[i]), depthOf(classes[j])
		return di < dj || di == dj && classes[i].Handle < classes[j].Handle
	})
	if has, err := hasFilters(ifindex, parents); err != nil || has {
		return nil, errors.Join(err, errors.New("has filters"))
	}
	seen := 1 // qdiscs accounted for: the root, then the leaves' chains
	for _, c := range classes {
		h, err := clock.DecodeHTBClass(c.Options)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		if h.MPU != 0 || h.Overhead != 0 || h.LinkLayer != 0 {
			return nil, fmt.Errorf("%s: mpu, overhead or linklayer", c)
		}
		// What tc chooses when none is given: q_htb.c's bursts, htb's
		// quantum (the rate in bytes over r2q, within 1000-200000).
		tc, err := clock.EncodeHTBClass(HTBClass{HTBClass: spec.HTBClass{Rate: h.Rate, Ceil: h.Ceil}})
		if err != nil {
			return nil, err
		}
		if d, err := clock.DecodeHTBClass(tc); err == nil {
			if h.Burst == d.Burst {
				h.Burst = 0
			}
			if h.CBurst == d.CBurst {
				h.CBurst = 0
			}
		}
		if uint64(h.Quantum) == min(max(uint64(h.Rate/8)/uint64(max(r2q, 1)), 1000), 200000) {
			h.Quantum = 0
		}
		cl := spec.Class{ID: spec.Handle(c.Handle).String(), HTB: &h.HTBClass}
		if c.Parent != tcHRoot && c.Parent != r.Handle {
			cl.Parent = spec.Handle(c.Parent).String()
		}
		for _, q := range tree {
			if q.Class || isDefault(q) || q.Parent != c.Handle {
				continue
			}
			ch, err := chainFrom(tree, q)
			if err != nil {
				return nil, err
			}
			if cl.Spec, err = decodeSpec(clock, ch); err != nil {
				return nil, err
			}
			seen += len(ch)
		}
		cs.Classes = append(cs.Classes, cl)
	}
	for _, q := range tree {
		if !q.Class && !isDefault(q) {
			seen--
		}
	}
	if seen != 0 {
		return nil, errors.New("qdiscs besides the root and the leaves' chains")
	}
	if err := cs.Validate(); err != nil {
		return nil, err
	}
	return cs, nil
}

// hasFilters reports whether a filter hangs from any of parents (qdiscs
// and classes).
func hasFilters(ifindex int, parents []uint32) (bool, error) {
	for _, p := range parents {
		req := nl.NewNetlinkRequest(unix.RTM_GETTFILTER, unix.NLM_F_DUMP)
		req.AddData(&nl.TcMsg{Family: unix.AF_UNSPEC, Ifindex: int32(ifindex), Parent: p})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, 0)
		if err != nil {
			return false, fmt.Errorf("dump filters: %w", err)
		}
		if len(msgs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// treeParts are the qdiscs and htb classes of tree whose counters Stats
// gives: the qdiscs first, as dumped, then the classes.
func treeParts(tree []qdisc) []qdisc {
	var out []qdisc
	for _, q := range tree {
		if !q.Class && !isDefault(q) || q.Class && userClasses[q.Kind] {
			out = append(out, q)
		}
	}
	return out
}
