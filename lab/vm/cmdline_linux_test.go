package vm

import (
	"strings"
	"testing"
)

// FuzzCmdlineValue checks the kernel command line reader the agent uses
// for its control channel, state directory and addresses: no panic, and a
// value found is the one of a "key=value" field of the line.
func FuzzCmdlineValue(f *testing.F) {
	for _, s := range []string{
		"mem=1024M root=/dev/root rootfstype=hostfs rootflags=/ ro wanlab.ctl=/dev/tty1 wanlab.state=/run/wanlab/vm/abc123 -- vm agent console=tty0",
		"console=ttyS0 quiet panic=-1 rdinit=/init wanlab.eth0=10.201.1.2/24 wanlab.gw=10.201.1.1",
		"wanlab.ctl", "wanlab.ctl=", "=x", "", "a=b=c wanlab.ctl=x=y",
	} {
		f.Add(s, "wanlab.ctl")
	}
	f.Fuzz(func(t *testing.T, line, key string) {
		v := cmdlineValue(line, key)
		if v == "" {
			return
		}
		found := false
		for _, kv := range strings.Fields(line) {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key && val == v {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("cmdlineValue(%q, %q) = %q: no such field", line, key, v)
		}
	})
}

func TestCmdlineValue(t *testing.T) {
	line := "ro init=/x wanlab.ctl=/dev/tty1 wanlab.state=/run/wanlab/vm/abc -- vm agent"
	for key, want := range map[string]string{"wanlab.ctl": "/dev/tty1", "wanlab.state": "/run/wanlab/vm/abc", "init": "/x", "ro": "", "wanlab": ""} {
		if got := cmdlineValue(line, key); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
}

func TestParseEngine(t *testing.T) {
	for in, want := range map[string]Engine{"auto": EngineAuto, "": EngineAuto, "kvm": EngineKVM, "uml": EngineUML, "tcg": EngineTCG} {
		if got, err := ParseEngine(in); err != nil || got != want {
			t.Errorf("ParseEngine(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"qemu", "UML", "kvm ", "x"} {
		if _, err := ParseEngine(bad); err == nil || !strings.Contains(err.Error(), "want auto, kvm, uml or tcg") {
			t.Errorf("ParseEngine(%q): %v", bad, err)
		}
	}
}

func TestVectorNICs(t *testing.T) {
	line := "mem=1024M con1=fd:3 vec0:transport=tap,ifname=wl1-rc,depth=128,gro=0 wanlab.eth0=10.0.0.2/24 vec1:transport=tap,ifname=x -- vm agent"
	got := vectorNICs(line)
	if len(got) != 2 || got[0] != "vec0" || got[1] != "vec1" {
		t.Errorf("vectorNICs = %q, want vec0 vec1", got)
	}
	if got := vectorNICs("con0=null,fd:4 wanlab.ctl=/dev/tty1"); len(got) != 0 {
		t.Errorf("no NICs: %q", got)
	}
}
