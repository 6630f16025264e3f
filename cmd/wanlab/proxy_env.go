package main

import (
	"fmt"
	"sort"
	"strings"
)

// The proxy's settings from the environment, for a container's entrypoint
// (docs/topologies.md): WANLAB_IFACES=eth1,eth2 stands for the two --iface
// flags, WANLAB_IMPAIR=SPEC for an --impair of both directions and
// WANLAB_IMPAIR_<IFACE>=SPEC for one of traffic leaving through IFACE.
// Flags given on the command line win: with any --impair, the WANLAB_IMPAIR
// variables are not read.
const (
	envImpair       = "WANLAB_IMPAIR"
	envImpairPrefix = "WANLAB_IMPAIR_"
)

// envName is the variable suffix that names iface: upper case, with every
// character outside A-Z, 0-9 and '_' as '_' (eth1 -> ETH1, br-lan ->
// BR_LAN).
func envName(iface string) string {
	b := []byte(strings.ToUpper(iface))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// impairFromEnv returns the --impair values the environment gives (environ
// as os.Environ returns it): WANLAB_IMPAIR first, then one per interface, so
// that a direction's own variable overrides the one for both. A
// WANLAB_IMPAIR_ variable that names neither interface is an error, so a
// typo does not leave a link unimpaired.
func impairFromEnv(ifaces [2]string, environ []string) ([]string, error) {
	var both string
	per := map[string]string{}
	var unknown []string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case name == envImpair:
			both = value
		case strings.HasPrefix(name, envImpairPrefix):
			suffix := strings.TrimPrefix(name, envImpairPrefix)
			matched := false
			for _, iface := range ifaces {
				if suffix == iface || suffix == envName(iface) {
					per[iface], matched = value, true
				}
			}
			if !matched {
				unknown = append(unknown, name)
			}
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%s names neither interface (%s: %s%s, %s: %s%s)", strings.Join(unknown, ", "),
			ifaces[0], envImpairPrefix, envName(ifaces[0]), ifaces[1], envImpairPrefix, envName(ifaces[1]))
	}
	var values []string
	if both != "" {
		values = append(values, both)
	}
	for _, iface := range ifaces {
		if v, ok := per[iface]; ok {
			values = append(values, iface+"="+v)
		}
	}
	return values, nil
}
