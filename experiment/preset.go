package experiment

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wanlab/wanlab/units"
)

// presetDef is one seed's setting, reduced to run in seconds.
type presetDef struct {
	about string
	cfg   Config
}

// presets reproduce the five field notes in /work/shared/seeds (see the
// README there). Sizes are reduced so each runs in well under a minute;
// the trends (speed against RTT, buffer, loss) are the seeds'.
var presets = map[string]presetDef{
	"seed000": {
		about: "server tcp_wmem pinned to 4096 and 100 ms of delay on the client's side: send-buffer limited, speed ~ wmem/RTT",
		cfg: Config{
			Impair:        map[string]string{ToServer: "delay 100ms"},
			ServerSysctls: map[string]string{"net.ipv4.tcp_wmem": "4096 4096 4096"},
			Size:          2 * units.MiB,
		},
	},
	"seed001": {
		about: "35 ms round trip, client tcp_rmem max 3 MiB: receive-window limited near 1.5 MB / 35 ms ≈ 43 MB/s",
		cfg: Config{
			Impair:        map[string]string{ToServer: "delay 35ms"},
			ClientSysctls: map[string]string{"net.ipv4.tcp_rmem": "4096 131072 3145728"},
			Size:          256 * units.MiB,
		},
	},
	"seed002": {
		about: "netem delay 100ms with a tbf rate 50mbit burst 50kb limit 500kb child on the data path: 50 Mbit/s at 100 ms",
		cfg: Config{
			Impair: map[string]string{ToClient: "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb"},
			Size:   32 * units.MiB,
		},
	},
	"seed003": {
		about: "wrk-style requests against a server answering in two writes with Nagle on: the client's delayed ACK adds ~40 ms",
		cfg: Config{
			Impair:      map[string]string{ToServer: "delay 3ms", ToClient: "delay 3ms"},
			Requests:    1000,
			Concurrency: 50,
		},
	},
	"seed004": {
		about: "1 % loss on the data path at 2 ms with cubic: loss limited, near the Mathis bound MSS·1.22/(RTT·√p)",
		cfg: Config{
			Impair: map[string]string{ToClient: "loss 1%", ToServer: "delay 2ms"},
			Size:   32 * units.MiB,
		},
	},
}

// seedCC is the congestion control of every preset (Linux's default).
const seedCC = "cubic"

// Presets lists the preset names in order.
func Presets() []string { return slices.Sorted(maps.Keys(presets)) }

// PresetAbout describes a preset in one line.
func PresetAbout(name string) string { return presets[name].about }

// Preset returns a preset's configuration (a copy the caller may change).
func Preset(name string) (Config, error) {
	p, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("preset %q: want one of %s", name, strings.Join(Presets(), ", "))
	}
	c := p.cfg
	c.Name = name
	// The seeds' kernels ran cubic; this machine may default to bbr, which
	// ignores random loss and would hide seed 004's trend.
	c.Client.CC, c.Server.CC = seedCC, seedCC
	c.Impair = maps.Clone(c.Impair)
	c.ClientSysctls = maps.Clone(c.ClientSysctls)
	c.ServerSysctls = maps.Clone(c.ServerSysctls)
	return c, nil
}
