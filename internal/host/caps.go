package host

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CapNetAdmin is CAP_NET_ADMIN's number (linux/capability.h).
const CapNetAdmin = 12

// HasCapability reports whether the calling process has capability c in
// its effective set, from the CapEff line of status (the text of
// /proc/self/status).
func HasCapability(status string, c uint) (bool, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		set, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return false, fmt.Errorf("CapEff %q: %w", strings.TrimSpace(v), err)
		}
		return c < 64 && set&(1<<c) != 0, nil
	}
	return false, fmt.Errorf("no CapEff line")
}

// SelfHasCapability is HasCapability of this process.
func SelfHasCapability(c uint) (bool, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, err
	}
	return HasCapability(string(b), c)
}
