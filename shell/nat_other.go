//go:build !linux

package shell

import (
	"fmt"
	"net/netip"
	"runtime"
)

const natTablePrefix = "wanlab_shell_"

func addNAT(string, netip.Prefix, string) error {
	return fmt.Errorf("nat: not supported on %s", runtime.GOOS)
}

func deleteNAT(string) error { return nil }
