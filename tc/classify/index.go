package classify

import (
	"net/netip"
	"slices"
)

// ruleIndex finds the first matching rule of a large rule set without
// trying every rule: the rules that test only a destination (or only a
// source) prefix, by far the common kind in a big tree (a prefix per
// class), sit in a map per prefix length, which gives the first of them a
// packet matches in one lookup per length; the other rules are tried in
// order, up to that one. The result is the linear scan's.
type ruleIndex struct {
	dst, src prefixIndex
	rest     []int // the other rules, in order
}

type prefixIndex struct {
	lens4, lens6 []int
	first        map[netip.Prefix]int // masked prefix: its lowest rule
}

func (x *prefixIndex) add(p netip.Prefix, i int) {
	p = p.Masked()
	if x.first == nil {
		x.first = map[netip.Prefix]int{}
	}
	if _, ok := x.first[p]; !ok {
		x.first[p] = i
	}
	lens := &x.lens6
	if p.Addr().Is4() {
		lens = &x.lens4
	}
	if !slices.Contains(*lens, p.Bits()) {
		*lens = append(*lens, p.Bits())
	}
}

// lookup returns the lowest rule whose prefix holds a (len(rules): none).
func (x *prefixIndex) lookup(a netip.Addr, none int) int {
	best := none
	lens := x.lens6
	if a.Is4() {
		lens = x.lens4
	}
	for _, bits := range lens {
		p, err := a.Prefix(bits)
		if err != nil {
			continue
		}
		if i, ok := x.first[p]; ok && i < best {
			best = i
		}
	}
	return best
}

// Build indexes the rules, for a classifier of many rules; the rules
// must not change afterwards. Classify gives the same answers with or
// without it.
func (c *Classifier) Build() {
	x := &ruleIndex{}
	for i, r := range c.Rules {
		m := r.Match
		other := m.HasProtocol || m.SrcPort.Set || m.DstPort.Set || m.HasDSCP
		switch {
		case !other && m.Dst.IsValid() && !m.Src.IsValid():
			x.dst.add(m.Dst, i)
		case !other && m.Src.IsValid() && !m.Dst.IsValid():
			x.src.add(m.Src, i)
		default:
			x.rest = append(x.rest, i)
		}
	}
	c.index = x
}

func (c *Classifier) classifyIndexed(h *header) int {
	n := len(c.Rules)
	best := min(c.index.dst.lookup(h.dst, n), c.index.src.lookup(h.src, n))
	for _, i := range c.index.rest {
		if i >= best {
			break
		}
		if c.Rules[i].Match.match(h) {
			return c.Rules[i].Class
		}
	}
	if best < n {
		return c.Rules[best].Class
	}
	return c.Default
}
