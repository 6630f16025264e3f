package host

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestCheckIfaceName(t *testing.T) {
	for _, ok := range []string{"eth0", "veth-a", "a", "wl-0123456789ab"} {
		if err := CheckIfaceName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, want := range map[string]string{"": "empty", "0123456789abcdef": "longer than 15", "a/b": "not a valid",
		"a b": "not a valid", "a:1": "not a valid", ".": "not a valid", "..": "not a valid"} {
		if err := CheckIfaceName(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", name, err, want)
		}
	}
}

func TestErrors(t *testing.T) {
	var err error = &NotFoundError{Iface: "eth9"}
	if !errors.Is(err, ErrNotFound) || err.Error() != `interface "eth9": not found` {
		t.Fatalf("%v", err)
	}
	op := &OpError{Op: "write sysctl", Object: "net/ipv4/ip_forward", Err: os.ErrPermission}
	if !errors.Is(op, os.ErrPermission) || op.Error() != "write sysctl net/ipv4/ip_forward: permission denied" {
		t.Fatalf("%v", op)
	}
}
