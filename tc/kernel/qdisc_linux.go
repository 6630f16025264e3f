package kernel

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// qdisc is one qdisc or class of a device's tree, as dumped: enough to
// recreate it (RTM_NEWQDISC/RTM_NEWTCLASS with the dumped TCA_OPTIONS).
type qdisc struct {
	Class   bool   `json:"class,omitempty"`
	Handle  uint32 `json:"handle"`
	Parent  uint32 `json:"parent"`
	Kind    string `json:"kind"`
	Options []byte `json:"options,omitempty"`
	stats   Counters
}

func (q qdisc) String() string {
	what := "qdisc"
	if q.Class {
		what = "class"
	}
	return fmt.Sprintf("%s %s %s parent %s", what, q.Kind, handleString(q.Handle), handleString(q.Parent))
}

func handleString(h uint32) string {
	switch h {
	case tcHRoot:
		return "root"
	case tcHIngress:
		return "ingress"
	}
	return fmt.Sprintf("%x:%x", h>>16, h&0xffff)
}

const (
	tcaKind    = 1
	tcaOptions = 2
	tcaStats2  = 7

	tcHRoot    = 0xffffffff // TC_H_ROOT
	tcHIngress = 0xfffffff1 // TC_H_INGRESS, also clsact's parent
)

// dumpTree returns the egress qdiscs and classes of ifindex (ingress and
// clsact, which a root change does not touch, are left out), qdiscs first.
func dumpTree(ifindex int) ([]qdisc, error) {
	var out []qdisc
	for _, typ := range []int{unix.RTM_GETQDISC, unix.RTM_GETTCLASS} {
		req := nl.NewNetlinkRequest(typ, unix.NLM_F_DUMP)
		req.AddData(&nl.TcMsg{Family: unix.AF_UNSPEC, Ifindex: int32(ifindex)})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, 0)
		if err != nil {
			return nil, fmt.Errorf("dump qdiscs: %w", err)
		}
		for _, m := range msgs {
			if len(m) < nl.SizeofTcMsg {
				continue
			}
			tm := nl.DeserializeTcMsg(m)
			if int(tm.Ifindex) != ifindex || tm.Parent == tcHIngress || tm.Handle == tcHIngress {
				continue
			}
			attrs, err := parseAttrs(m[nl.SizeofTcMsg:])
			if err != nil {
				return nil, err
			}
			kind := string(attrs[tcaKind])
			if i := len(kind); i > 0 && kind[i-1] == 0 {
				kind = kind[:i-1]
			}
			if kind == "ingress" || kind == "clsact" {
				continue
			}
			q := qdisc{Class: typ == unix.RTM_GETTCLASS, Handle: tm.Handle, Parent: tm.Parent, Kind: kind}
			if o, ok := attrs[tcaOptions]; ok {
				q.Options = append([]byte(nil), o...)
			}
			if st, ok := attrs[tcaStats2]; ok {
				q.stats = parseStats2(st)
			}
			out = append(out, q)
		}
	}
	return out, nil
}

// root returns the root qdisc of a tree.
func root(tree []qdisc) (qdisc, bool) {
	for _, q := range tree {
		if !q.Class && q.Parent == tcHRoot {
			return q, true
		}
	}
	return qdisc{}, false
}

// isDefault reports whether q is a qdisc the kernel attached itself
// (noqueue, pfifo_fast, mq...): those have handle 0.
func isDefault(q qdisc) bool { return q.Handle == 0 }

func sendQdisc(ifindex int, q qdisc, msgType, flags int) error {
	nl.EnableErrorMessageReporting = true // name the cause ("Specified qdisc kind is unknown")
	req := nl.NewNetlinkRequest(msgType, unix.NLM_F_ACK|flags)
	req.AddData(&nl.TcMsg{Family: unix.AF_UNSPEC, Ifindex: int32(ifindex), Handle: q.Handle, Parent: q.Parent})
	if q.Kind != "" {
		req.AddData(nl.NewRtAttr(tcaKind, nl.ZeroTerminated(q.Kind)))
	}
	if q.Options != nil {
		req.AddData(nl.NewRtAttr(tcaOptions, configFromDump(q)))
	}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// addQdisc creates q (a qdisc or a class).
func addQdisc(ifindex int, q qdisc, flags int) error {
	t := unix.RTM_NEWQDISC
	if q.Class {
		t = unix.RTM_NEWTCLASS
	}
	if err := sendQdisc(ifindex, q, t, unix.NLM_F_CREATE|flags); err != nil {
		return fmt.Errorf("add %s: %w", q, err)
	}
	return nil
}

// deleteRoot removes the root qdisc; the kernel attaches its default.
func deleteRoot(ifindex int) error {
	err := sendQdisc(ifindex, qdisc{Parent: tcHRoot}, unix.RTM_DELQDISC, 0)
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete root qdisc: %w", err)
	}
	return nil
}

// userClasses are the qdisc kinds whose classes are made by RTM_NEWTCLASS.
var userClasses = map[string]bool{"htb": true, "hfsc": true, "drr": true, "qfq": true, "cbq": true}

// restoreTree makes the device's egress tree tree again: our root goes,
// and a tree that was not the kernel's default is recreated root first,
// then each class and qdisc once its parent exists.
func restoreTree(ifindex int, tree []qdisc) error {
	if err := deleteRoot(ifindex); err != nil {
		return err
	}
	r, ok := root(tree)
	if !ok || isDefault(r) {
		return nil
	}
	if err := addQdisc(ifindex, r, unix.NLM_F_REPLACE); err != nil {
		return err
	}
	exists := map[uint32]bool{r.Handle: true}
	kindOf := map[uint32]string{}
	for _, q := range tree {
		if !q.Class {
			kindOf[q.Handle>>16] = q.Kind
		}
	}
	done := map[int]bool{}
	for progress := true; progress; {
		progress = false
		for i, q := range tree {
			parent := q.Parent
			if q.Class && parent == tcHRoot {
				parent = q.Handle &^ 0xffff // a top-level class of its qdisc
			}
			if done[i] || parent == tcHRoot {
				continue
			}
			// A class's parent is a qdisc (major:0) or class; a qdisc's
			// parent is a class. Qdiscs with handle 0 are the kernel's
			// defaults under a class: created with it. So are the classes
			// of classful qdiscs that do not create classes on request
			// (tbf's and netem's single class, prio's bands): for those
			// the qdisc stands in for its class, which the dump lists
			// after every qdisc. A class made on request (htb's) must be
			// there before the qdisc under it.
			if !exists[parent] && (userClasses[kindOf[parent>>16]] || !exists[parent&0xffff0000]) {
				continue
			}
			done[i], progress = true, true
			if !q.Class && isDefault(q) || q.Class && !userClasses[kindOf[q.Handle>>16]] {
				exists[q.Handle] = true
				continue
			}
			if err := addQdisc(ifindex, q, unix.NLM_F_EXCL); err != nil {
				return err
			}
			exists[q.Handle] = true
		}
	}
	for i, q := range tree {
		if !done[i] && (q.Parent != tcHRoot || q.Class) {
			return fmt.Errorf("restore %s: its parent is gone", q)
		}
	}
	return nil
}

// configFromDump turns dumped options into ones the kind's change function
// accepts, where the two differ: htb dumps its version as HTB_VER
// (0x30011) in struct tc_htb_glob but htb_init wants HTB_VER >> 16.
func configFromDump(q qdisc) []byte {
	if q.Kind != "htb" || q.Class {
		return q.Options
	}
	const tcaHTBInit = 2
	var a attrs
	b := q.Options
	for len(b) >= 4 {
		n := int(native.Uint16(b))
		typ := native.Uint16(b[2:])
		if n < 4 || n > len(b) {
			return q.Options
		}
		v := append([]byte(nil), b[4:n]...)
		if typ&^(nlaFNested|1<<14) == tcaHTBInit && len(v) >= 4 && native.Uint32(v) > 0xffff {
			native.PutUint32(v, native.Uint32(v)>>16)
		}
		a.add(typ, v)
		if align4(n) >= len(b) {
			break
		}
		b = b[align4(n):]
	}
	return a.b
}
