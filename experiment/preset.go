package experiment

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wanlab/wanlab/units"
)

// presetDef is one scenario's setting, reduced to run in seconds.
type presetDef struct {
	scenario string // the name a newcomer reads; the map key is its old id
	about    string
	cfg      Config
}

// presets reproduce the scenarios of docs/scenarios.md, each known by its
// name (send-buffer, ...) and the five of the seeds also by their old id
// (seed000, ...). Sizes are
// reduced so each runs in well under a minute; the trends (speed against
// RTT, buffer, loss) are those the scenarios describe.
var presets = map[string]presetDef{
	"seed000": {
		scenario: "send-buffer",
		about:    "server tcp_wmem pinned to 4096 and 100 ms of delay on the client's side: send-buffer limited, speed ~ wmem/RTT",
		cfg: Config{
			Impair:        map[string]string{ToServer: "delay 100ms"},
			ServerSysctls: map[string]string{"net.ipv4.tcp_wmem": "4096 4096 4096"},
			Size:          2 * units.MiB,
		},
	},
	"seed001": {
		scenario: "receive-window",
		about:    "35 ms round trip, client tcp_rmem max 3 MiB: receive-window limited near 1.5 MB / 35 ms ≈ 43 MB/s",
		cfg: Config{
			Impair:        map[string]string{ToServer: "delay 35ms"},
			ClientSysctls: map[string]string{"net.ipv4.tcp_rmem": "4096 131072 3145728"},
			Size:          256 * units.MiB,
		},
	},
	"seed002": {
		scenario: "shaped-link",
		about:    "netem delay 100ms with a tbf rate 50mbit burst 50kb limit 500kb child on the data path: 50 Mbit/s at 100 ms",
		cfg: Config{
			Impair: map[string]string{ToClient: "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb"},
			Size:   32 * units.MiB,
		},
	},
	"managed-queue": {
		scenario: "managed-queue",
		about:    "shaped-link with fq_codel as tbf's child instead of its 500 kB FIFO: the same 50 Mbit/s at 100 ms, queueing delay near fq_codel's 5 ms target instead of ~80 ms",
		cfg: Config{
			Impair: map[string]string{ToClient: "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb | fq_codel"},
			Size:   32 * units.MiB,
		},
	},
	"seed003": {
		scenario: "delayed-ack",
		about:    "wrk-style requests against a server answering in two writes with Nagle on: the client's delayed ACK adds ~40 ms",
		cfg: Config{
			Impair:      map[string]string{ToServer: "delay 3ms", ToClient: "delay 3ms"},
			Requests:    1000,
			Concurrency: 50,
		},
	},
	"seed004": {
		scenario: "random-loss",
		about:    "1 % loss on the data path at 2 ms with cubic: loss limited, near the Mathis bound MSS·1.22/(RTT·√p)",
		cfg: Config{
			Impair: map[string]string{ToClient: "loss 1%", ToServer: "delay 2ms"},
			Size:   32 * units.MiB,
		},
	},
}

// seedCC is the congestion control of every preset (Linux's default).
const seedCC = "cubic"

// Presets lists the preset names in order: the seeds' ids, then the
// presets that have only a name.
func Presets() []string {
	ids := slices.Sorted(maps.Keys(presets))
	seeds := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !strings.HasPrefix(id, "seed") })
	rest := slices.DeleteFunc(ids, func(id string) bool { return strings.HasPrefix(id, "seed") })
	return append(seeds, rest...)
}

// PresetAbout describes a preset (by id or scenario name) in one line.
func PresetAbout(name string) string { return presets[presetID(name)].about }

// ScenarioName is the scenario name of a preset id ("receive-window" for
// "seed001"); names pass through.
func ScenarioName(name string) string {
	if p, ok := presets[presetID(name)]; ok {
		return p.scenario
	}
	return name
}

// presetID returns the id of a preset named by id or scenario name.
func presetID(name string) string {
	if _, ok := presets[name]; ok {
		return name
	}
	for id, p := range presets {
		if p.scenario == name {
			return id
		}
	}
	return name
}

// Preset returns a preset's configuration (a copy the caller may change),
// by scenario name or id; the configuration keeps the name it was asked by.
func Preset(name string) (Config, error) {
	p, ok := presets[presetID(name)]
	if !ok {
		var names []string
		for _, id := range Presets() {
			if presets[id].scenario == id {
				names = append(names, id)
			} else {
				names = append(names, presets[id].scenario+" ("+id+")")
			}
		}
		return Config{}, fmt.Errorf("preset %q: want one of %s", name, strings.Join(names, ", "))
	}
	c := p.cfg
	c.Name = name
	// The scenarios' kernels ran cubic; this machine may default to bbr,
	// which ignores random loss and would hide random-loss's trend.
	c.Client.CC, c.Server.CC = seedCC, seedCC
	c.Impair = maps.Clone(c.Impair)
	c.ClientSysctls = maps.Clone(c.ClientSysctls)
	c.ServerSysctls = maps.Clone(c.ServerSysctls)
	return c, nil
}
