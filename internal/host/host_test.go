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

func TestSysctl(t *testing.T) {
	dir := t.TempDir()
	s := Sysctl{Root: dir}
	if err := os.MkdirAll(dir+"/net/ipv4/conf/eth0.100", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/net/ipv4/tcp_rmem", []byte("4096\t131072\t6291456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/net/ipv4/conf/eth0.100/forwarding", []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Read("net.ipv4.tcp_rmem"); err != nil || v != "4096 131072 6291456" {
		t.Fatalf("Read = %q, %v", v, err)
	}
	if err := s.Write("net/ipv4/conf/eth0.100/forwarding", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.ReadRaw("net/ipv4/conf/eth0.100/forwarding"); string(b) != "1" {
		t.Fatalf("a path with a dot in a name: %q", b)
	}
	if m, err := s.Glob("net/ipv4/conf/*/forwarding"); err != nil || len(m) != 1 || m[0] != "net/ipv4/conf/eth0.100/forwarding" {
		t.Fatalf("Glob = %v, %v", m, err)
	}
	if s.Exists("net.core.default_qdisc") {
		t.Fatal("a missing key exists")
	}
}

func TestHasCapability(t *testing.T) {
	status := "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\n"
	// a80425fb is Docker's default set: no CAP_NET_ADMIN (bit 12).
	if ok, err := HasCapability(status, CapNetAdmin); err != nil || ok {
		t.Errorf("docker default: %v, %v", ok, err)
	}
	if ok, err := HasCapability(strings.Replace(status, "a80425fb", "a80435fb", 1), CapNetAdmin); err != nil || !ok {
		t.Errorf("with NET_ADMIN: %v, %v", ok, err)
	}
	if _, err := HasCapability("CapEff:\tzz\n", CapNetAdmin); err == nil {
		t.Error("bad CapEff accepted")
	}
	if _, err := HasCapability("Name:\tx\n", CapNetAdmin); err == nil {
		t.Error("no CapEff accepted")
	}
}
