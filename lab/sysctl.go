package lab

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// WriteSysctls writes sysctls inside the named namespace ("" = the current
// one), keys in sysctl notation ("net.ipv4.tcp_rmem"), in key order. Only
// per-namespace keys (net.*) take effect there; writing a global key from
// a namespace fails or changes the host, so keys outside net. are refused.
func WriteSysctls(ns string, kv map[string]string) error {
	if len(kv) == 0 {
		return nil
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		if !strings.HasPrefix(k, "net.") || strings.Contains(k, "..") || strings.ContainsAny(k, "/ ") {
			return fmt.Errorf("sysctl %q: only net.* keys can be set per namespace", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return nsrun.DoNamed(ns, func() error {
		for _, k := range keys {
			// /proc/sys/net resolves against the calling thread's
			// namespace, which DoNamed has just entered.
			if err := host.ProcSys.Write(k, []byte(kv[k])); err != nil {
				return fmt.Errorf("sysctl %s=%q in netns %s: %w", k, kv[k], ns, errors.Unwrap(err))
			}
		}
		return nil
	})
}

// ReadSysctl reads one sysctl inside the named namespace.
func ReadSysctl(ns, key string) (string, error) {
	var v string
	err := nsrun.DoNamed(ns, func() error {
		b, err := host.ProcSys.ReadRaw(key)
		if err != nil {
			return fmt.Errorf("sysctl %s in netns %s: %w", key, ns, errors.Unwrap(err))
		}
		v = strings.TrimSpace(string(b))
		return nil
	})
	return v, err
}
