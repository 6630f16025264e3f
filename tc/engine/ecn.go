package engine

import "github.com/wanlab/wanlab/internal/header"

// setCE is the kernel's INET_ECN_set_ce() (header.SetCE): CE on an
// ECN-capable packet, true; false for a not-ECT packet, which netem then
// drops.
func setCE(b []byte) bool { return header.SetCE(b) }
