package shell

import (
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/spec"
)

// Directions serves a proxy's control API under direction names instead
// of interface names: a shell's "down" and "up", a lab's "to-client" and
// "to-server". Specs, Stats and Warnings name the directions so; Install
// takes either name, so `wanlab proxy set up=SPEC` and a set naming the
// interface both work.
type Directions struct {
	Backend interface {
		control.Backend
		control.Warner
	}
	// Ifaces are the proxy's egress interfaces, Names what to call them.
	Ifaces, Names [2]string
}

// Install implements control.Backend.
func (d Directions) Install(name string, ch spec.Change) error {
	return d.Backend.Install(d.iface(name), ch)
}

// Specs implements control.Backend.
func (d Directions) Specs() map[string]string { return renameKeys(d, d.Backend.Specs()) }

// Stats implements control.Backend.
func (d Directions) Stats() control.Stats {
	st := d.Backend.Stats()
	st.Directions = append([]control.Direction(nil), st.Directions...)
	for i := range st.Directions {
		st.Directions[i].Iface = d.name(st.Directions[i].Iface)
	}
	return st
}

// Warnings implements control.Warner.
func (d Directions) Warnings() map[string][]string { return renameKeys(d, d.Backend.Warnings()) }

func (d Directions) iface(name string) string {
	for i, n := range d.Names {
		if n == name {
			return d.Ifaces[i]
		}
	}
	return name
}

func (d Directions) name(iface string) string {
	for i, n := range d.Ifaces {
		if n == iface {
			return d.Names[i]
		}
	}
	return iface
}

func renameKeys[V any](d Directions, m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[d.name(k)] = v
	}
	return out
}
