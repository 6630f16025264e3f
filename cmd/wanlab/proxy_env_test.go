package main

import (
	"slices"
	"strings"
	"testing"
)

func TestImpairFromEnv(t *testing.T) {
	ifaces := [2]string{"eth1", "br-lan"}
	got, err := impairFromEnv(ifaces, []string{
		"PATH=/bin",
		"WANLAB_IMPAIR=delay 5ms",
		"WANLAB_IMPAIR_BR_LAN=delay 100ms | tbf rate 50mbit burst 50kb limit 500kb",
		"WANLAB_IMPAIR_eth1=loss 1%",
		"WANLAB_IFACES=eth1,br-lan",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"delay 5ms", "eth1=loss 1%", "br-lan=delay 100ms | tbf rate 50mbit burst 50kb limit 500kb"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	// The values read as --impair would: the direction's own wins.
	specs, err := parseImpair(ifaces, got)
	if err != nil || specs[0] != "loss 1%" || !strings.HasPrefix(specs[1], "delay 100ms") {
		t.Errorf("as --impair: %q, %v", specs, err)
	}
	if got, err := impairFromEnv(ifaces, []string{"HOME=/"}); err != nil || len(got) != 0 {
		t.Errorf("no variables: %q, %v", got, err)
	}
	_, err = impairFromEnv(ifaces, []string{"WANLAB_IMPAIR_ETH2=delay 1ms"})
	if err == nil || !strings.Contains(err.Error(), "WANLAB_IMPAIR_ETH2 names neither interface (eth1: WANLAB_IMPAIR_ETH1, br-lan: WANLAB_IMPAIR_BR_LAN)") {
		t.Errorf("unknown interface: %v", err)
	}
}

// TestProxyEnvConfig runs the flag parsing with the variables a container
// entrypoint sets and no flags.
func TestProxyEnvConfig(t *testing.T) {
	t.Setenv("WANLAB_IFACES", "eth1,eth2")
	t.Setenv("WANLAB_IMPAIR_ETH2", "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb")
	t.Setenv("WANLAB_LABELS", "lab=l1,link=a-b")
	var out strings.Builder
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	// --backend bogus stops the command after the configuration is read
	// (exit 2) and before anything touches the host.
	err := app.Run([]string{"wanlab", "proxy", "--backend", "bogus"})
	if err == nil || !strings.Contains(err.Error(), `--backend "bogus"`) {
		t.Fatalf("want the backend error after the environment was read: %v", err)
	}
	t.Setenv("WANLAB_IMPAIR_ETH3", "delay 1ms")
	err = app.Run([]string{"wanlab", "proxy"})
	if err == nil || !strings.Contains(err.Error(), "WANLAB_IMPAIR_ETH3 names neither interface") {
		t.Fatalf("unknown interface variable: %v", err)
	}
}
