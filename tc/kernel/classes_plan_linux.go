package kernel

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/wanlab/wanlab/tc/classify"
	"github.com/wanlab/wanlab/tc/spec"
)

// Traffic classes as the kernel's own tree: an htb root qdisc,
// one htb class per class, a netem/tbf chain under each leaf that has a
// spec, and a u32 filter per match, as "tc qdisc add ... root handle 1:
// htb default N", "tc class add ... htb rate R ceil C", "tc qdisc add ...
// parent 1:10 handle 10: netem ..." and "tc filter add ... u32 match ip
// dst P flowid 1:10" build it.

// parseHandle is spec.ParseHandle as the kernel's 32-bit value.
func parseHandle(id string) (uint32, error) {
	h, err := spec.ParseHandle(id)
	return uint32(h), err
}

// planClasses encodes cs. Everything that cannot be expressed is an error
// naming the class or filter.
func planClasses(clock Clock, cs *spec.Classes) (*plan, error) {
	if err := cs.Validate(); err != nil {
		return nil, err
	}
	if !cs.HasTree() {
		return nil, fmt.Errorf("classes without htb rates: the kernel needs a classful root (give every class a rate, e.g. 'class 1:1 htb rate 1gbit')")
	}
	p := &plan{text: cs.String()}
	first, err := parseHandle(cs.Classes[0].ID)
	if err != nil {
		return nil, err
	}
	major := first >> 16 // the htb qdisc's
	var def uint32
	if cs.Default != "" {
		h, err := parseHandle(cs.Default)
		if err != nil {
			return nil, err
		}
		def = h & 0xffff
	}
	root := qdisc{Kind: "htb", Handle: major << 16, Parent: tcHRoot, Options: EncodeHTBQdisc(HTBQdisc{Default: def, R2Q: cs.R2Q})}
	p.objs = append(p.objs, tcObject{q: root, what: "htb root qdisc", needs: "htb"})
	for _, c := range cs.Classes {
		h, err := parseHandle(c.ID)
		if err != nil {
			return nil, err
		}
		if h>>16 != major {
			return nil, fmt.Errorf("class %s: major number differs from the tree's %x:", c.ID, major)
		}
		parent := major << 16
		if c.Parent != "" {
			if parent, err = parseHandle(c.Parent); err != nil {
				return nil, err
			}
		}
		hc := HTBClass{HTBClass: *c.HTB}
		opt, err := clock.EncodeHTBClass(hc)
		if err != nil {
			return nil, fmt.Errorf("class %s: %w", c.ID, err)
		}
		p.objs = append(p.objs, tcObject{q: qdisc{Class: true, Kind: "htb", Handle: h, Parent: parent, Options: opt},
			what: "class " + c.ID, needs: "htb"})
	}
	// Leaf chains: handles 100:, 101:, ... above any class major.
	next := uint32(0x100)
	for _, c := range cs.Classes {
		if c.Spec.IsEmpty() {
			continue
		}
		if c.HTB.Limit != 0 {
			return nil, fmt.Errorf("class %s: limit %d applies to the leaf's default pfifo; with a leaf spec set the limit in its netem/tbf", c.ID, c.HTB.Limit)
		}
		parent, _ := parseHandle(c.ID)
		for i, st := range c.Spec.Stages {
			opt, err := encodeStage(clock, st)
			if err != nil {
				return nil, fmt.Errorf("class %s: leaf stage %d: %w", c.ID, i+1, err)
			}
			h := next << 16
			next++
			p.objs = append(p.objs, tcObject{q: qdisc{Kind: st.Kind(), Handle: h, Parent: parent, Options: opt},
				what: fmt.Sprintf("leaf %s %s", c.ID, st), needs: st.Kind()})
			parent = h | 1
		}
	}
	// One tc filter prio holds one protocol, and filters of different
	// prios are tried in prio order; within a prio, u32 tries its filters
	// in the order of their handles' node ids (u32_change keeps each hash
	// bucket sorted). So a run of selectors of one protocol shares a prio,
	// each given the next node id (1 to 0xfff, the 12 bits a u32 handle
	// has for it; the kernel's own ids start at 0x800 and wrap, which
	// would reorder a long run), and the next protocol or the 4096th
	// selector takes the next prio: the first match in the spec's order
	// still wins, and a tree of thousands of filters stays within u32's
	// 2047 hash tables (one per prio, gen_new_htid), which a prio per
	// filter exhausts.
	prio, node := uint32(0), uint32(0)
	lastType := -1
	for _, f := range cs.Filters {
		flow, _ := parseHandle(f.FlowID)
		sels, err := u32Selectors(f.Match)
		if err != nil {
			return nil, fmt.Errorf("filter %s flowid %s: %w", f.Match, f.FlowID, err)
		}
		for _, s := range sels {
			if int(s.ethertype) != lastType || node == maxU32Node {
				prio++
				node = 0
				lastType = int(s.ethertype)
			}
			node++
			var a attrs
			a.u32(tcaU32ClassID, flow)
			a.add(tcaU32Sel, s.sel)
			info := prio<<16 | uint32(htons(s.ethertype))
			p.objs = append(p.objs, tcObject{q: qdisc{Kind: "u32", Handle: node, Parent: major << 16, Options: a.b}, filter: true, info: info,
				what: fmt.Sprintf("filter %s flowid %s", f.Match, f.FlowID), needs: "u32"})
		}
	}
	return p, nil
}

// maxU32Node is the largest node id of a u32 filter handle (12 bits).
const maxU32Node = 0xfff

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TCA_U32_* attributes and flags (include/uapi/linux/pkt_cls.h).
const (
	tcaU32ClassID  = 1
	tcaU32Sel      = 5
	tcU32Terminal  = 1
	ethPIP         = 0x0800
	ethPIPv6       = 0x86dd
	ethPAll        = 0x0003
	u32KeyMaxBytes = 16
)

type u32Sel struct {
	sel       []byte
	ethertype uint16
}

// u32Family is where one IP version's header holds what a match tests,
// as q_u32.c's "match ip" and "match ip6" read it: the offsets of the
// addresses, of the protocol (next header) and of the ports after a
// header without options or extensions, and the bit positions of the
// protocol and of the DSCP (in the first word, ToS or traffic class).
type u32Family struct {
	ethertype             uint16
	src, dst, ports       int32
	protoOff              int32
	protoShift, dscpShift uint
}

var (
	u32IPv4 = u32Family{ethertype: ethPIP, src: 12, dst: 16, ports: 20, protoOff: 8, protoShift: 16, dscpShift: 18}
	u32IPv6 = u32Family{ethertype: ethPIPv6, src: 8, dst: 24, ports: 40, protoOff: 4, protoShift: 8, dscpShift: 22}
)

type u32Key struct {
	mask, val uint32 // network order values, as bytes on the wire
	off       int32
}

// u32Selectors encodes m as u32 selectors: one for IPv4 and/or one for
// IPv6 (a match naming no address family gets both), as q_u32.c packs
// "match ip|ip6 ..." keys. Ports are read at the offset an IP header
// without options (IPv4) or extension headers (IPv6) puts them, as u32's
// "match ip dport" does; a port range must be one aligned power of two.
func u32Selectors(m classify.Match) ([]u32Sel, error) {
	v4 := !m.Src.IsValid() && !m.Dst.IsValid() || m.Src.IsValid() && m.Src.Addr().Is4() || m.Dst.IsValid() && m.Dst.Addr().Is4()
	v6 := !m.Src.IsValid() && !m.Dst.IsValid() || m.Src.IsValid() && m.Src.Addr().Is6() || m.Dst.IsValid() && m.Dst.Addr().Is6()
	if m.Src.IsValid() && m.Dst.IsValid() && m.Src.Addr().Is4() != m.Dst.Addr().Is4() {
		return nil, fmt.Errorf("src and dst of different address families")
	}
	var out []u32Sel
	for _, fam := range []struct {
		u32Family
		want bool
	}{{u32IPv4, v4}, {u32IPv6, v6}} {
		if !fam.want {
			continue
		}
		var keys []u32Key
		add := func(off int32, val, mask uint32) { keys = append(keys, u32Key{mask: mask, val: val & mask, off: off}) }
		prefix := func(base int32, p netip.Prefix) {
			addr := p.Addr().AsSlice()
			for i, bitsLen := 0, p.Bits(); i < len(addr)/4 && bitsLen > 0; i++ {
				n := min(bitsLen, 32)
				mask := ^uint32(0) << (32 - n)
				add(base+int32(4*i), binary.BigEndian.Uint32(addr[4*i:]), mask)
				bitsLen -= n
			}
		}
		if m.Src.IsValid() {
			prefix(fam.src, m.Src)
		}
		if m.Dst.IsValid() {
			prefix(fam.dst, m.Dst)
		}
		if m.HasProtocol {
			add(fam.protoOff, uint32(m.Protocol)<<fam.protoShift, 0xff<<fam.protoShift)
		}
		if m.HasDSCP {
			add(0, uint32(m.DSCP)<<fam.dscpShift, 0x3f<<fam.dscpShift)
		}
		for _, pr := range []struct {
			r     classify.PortRange
			shift uint
		}{{m.SrcPort, 16}, {m.DstPort, 0}} {
			if !pr.r.Set {
				continue
			}
			size := uint32(pr.r.Hi) - uint32(pr.r.Lo) + 1
			if bits.OnesCount32(size) != 1 || uint32(pr.r.Lo)%size != 0 {
				return nil, fmt.Errorf("port range %s is not one u32 mask (an aligned power of two)", pr.r)
			}
			mask := (0xffff &^ (size - 1)) << pr.shift
			add(fam.ports, uint32(pr.r.Lo)<<pr.shift, mask)
		}
		// Merge keys at the same offset (dscp and protocol never share
		// one; sport and dport do).
		merged := keys[:0]
		for _, k := range keys {
			found := false
			for i := range merged {
				if merged[i].off == k.off {
					merged[i].mask |= k.mask
					merged[i].val |= k.val
					found = true
				}
			}
			if !found {
				merged = append(merged, k)
			}
		}
		if len(merged) == 0 {
			// match anything: u32 needs one key; "match u32 0 0".
			merged = append(merged, u32Key{})
		}
		var w wire // struct tc_u32_sel
		w.u8(tcU32Terminal)
		w.u8(0) // offshift
		w.u8(uint8(len(merged)))
		w.u8(0)  // pad
		w.u16(0) // offmask (be16)
		w.u16(0) // off
		w.u16(0) // offoff
		w.u16(0) // hoff
		w.u32(0) // hmask (be32)
		for _, k := range merged {
			w.b = binary.BigEndian.AppendUint32(w.b, k.mask)
			w.b = binary.BigEndian.AppendUint32(w.b, k.val)
			w.s32(k.off)
			w.s32(0) // offmask
		}
		out = append(out, u32Sel{sel: w.b, ethertype: fam.ethertype})
	}
	return out, nil
}
