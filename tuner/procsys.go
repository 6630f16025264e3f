// Package tuner reads, explains, plans and changes the Linux sysctls that
// bound one TCP connection's throughput (socket buffer limits, window
// scaling, congestion control), per network namespace, and records what it
// changed so a revert restores the previous values byte for byte.
package tuner

import (
	"errors"
	"os"
	"strings"

	"github.com/wanlab/wanlab/internal/host"
)

// ProcSys reads and writes sysctls below a root directory: /proc/sys on a
// live system, a fixture tree in tests (host.Sysctl, shared with the
// proxy's routing and the lab).
type ProcSys = host.Sysctl

// Host is the live /proc/sys.
var Host = host.ProcSys

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// isNotExist reports a key missing from the tree.
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
