package kernel

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// add creates o on ifindex, the root replacing whatever is there.
func (o tcObject) add(ifindex int, root bool) error {
	switch {
	case o.filter:
		return addFilter(ifindex, o)
	case root:
		return addQdisc(ifindex, o.q, unix.NLM_F_REPLACE)
	}
	return addQdisc(ifindex, o.q, unix.NLM_F_EXCL)
}

func addFilter(ifindex int, o tcObject) error {
	nl.EnableErrorMessageReporting = true
	req := nl.NewNetlinkRequest(unix.RTM_NEWTFILTER, unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	req.AddData(&nl.TcMsg{Family: unix.AF_UNSPEC, Ifindex: int32(ifindex), Handle: o.q.Handle, Parent: o.q.Parent, Info: o.info})
	req.AddData(nl.NewRtAttr(tcaKind, nl.ZeroTerminated(o.q.Kind)))
	req.AddData(nl.NewRtAttr(tcaOptions, o.q.Options))
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// probeSample is the part of a tree's plan probe builds: the root, the first
// class, the first object of each other kind the kernel must know (a
// qdisc kind, u32) and the classes and qdiscs above it. Building the whole tree twice would
// double an apply of thousands of classes, each of which the kernel
// binds in time growing with the classes already there (tc_bind_tclass).
func probeSample(full *plan) *plan {
	at := map[uint32]int{} // class and qdisc handles: their index
	take := make([]bool, len(full.objs))
	var need func(i int)
	need = func(i int) {
		if take[i] {
			return
		}
		take[i] = true
		parent := full.objs[i].q.Parent
		if j, ok := at[parent]; ok {
			need(j)
		} else if j, ok := at[parent&0xffff0000]; ok {
			need(j)
		}
	}
	seen := map[string]bool{}
	for i, o := range full.objs {
		if !o.filter {
			at[o.q.Handle] = i
		}
		key := fmt.Sprint(o.needs, o.q.Class, o.filter)
		if !seen[key] {
			seen[key] = true
			need(i)
		}
	}
	sample := &plan{}
	for i, o := range full.objs {
		if take[i] {
			sample.objs = append(sample.objs, o)
		}
	}
	return sample
}

// probe builds a sample of the plan (probeSample) on lo in a scratch
// namespace and collects what the kernel refuses as unknown, naming
// every object of the plan of a kind it lacks.
func probe(full *plan) error {
	sample := probeSample(full)
	name := fmt.Sprintf("wanlab-probe-%d", os.Getpid())
	ns, err := nsrun.Create(name)
	if err != nil {
		return fmt.Errorf("scratch namespace for the kernel probe: %w", err)
	}
	ns.Close()
	defer nsrun.Delete(name)
	missing := map[string][]string{}
	var other error
	err = nsrun.DoNamed(name, func() error {
		l, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		idx := l.Attrs().Index
		failed := map[uint32]bool{}
		for i, o := range sample.objs {
			parent := o.q.Parent
			if failed[parent] || failed[parent&0xffff0000] {
				failed[o.q.Handle] = true
				continue // its parent could not be made
			}
			err := o.add(idx, i == 0)
			if err == nil {
				continue
			}
			if !o.filter {
				failed[o.q.Handle] = true
			}
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
				if missing[o.needs] == nil {
					for _, x := range full.objs {
						if x.needs == o.needs {
							missing[o.needs] = append(missing[o.needs], x.what)
						}
					}
				}
				continue
			}
			if other == nil {
				other = fmt.Errorf("%s: %w", o.what, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kernel probe: %w", err)
	}
	if len(missing) > 0 {
		var parts []string
		for kind, whats := range missing {
			what := fmt.Sprintf("no %s qdisc (sch_%s)", kind, kind)
			if kind == "u32" {
				what = "no u32 classifier (cls_u32), so no filter can send packets to a class"
			}
			parts = append(parts, what+" for "+strings.Join(dedupe(whats), ", "))
		}
		sort.Strings(parts)
		return &MissingError{Parts: parts}
	}
	return other
}

func dedupe(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
