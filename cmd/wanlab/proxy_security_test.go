package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/proxy/control"
)

// startFakeTCP serves a fake proxy on loopback TCP with a token, its
// credentials written where `proxy set|stats` look.
func startFakeTCP(t *testing.T) (*fakeProxy, string, string) {
	t.Helper()
	dir := t.TempDir()
	fake := &fakeProxy{specs: map[string]string{"veth-a": "", "veth-b": "delay 50ms"}}
	tok, err := control.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s, err := control.Start("127.0.0.1:0", fake, control.Access{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr := s.Addr().String()
	ep, err := s.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	remove, err := control.WriteCredentials(dir, [2]string{"veth-a", "veth-b"}, ep, tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remove() })
	old := proxyControlDir
	proxyControlDir = dir
	t.Cleanup(func() { proxyControlDir = old })
	return fake, addr, dir
}

func TestProxySetOverTCPUsesTheToken(t *testing.T) {
	fake, addr, dir := startFakeTCP(t)
	out, code, err := runProxyCmd("set", "--control", addr, "veth-a=delay 7ms")
	if err != nil || code != 0 || out != "veth-a=delay 7ms\n" {
		t.Fatalf("set over TCP: %q, exit %d, %v", out, code, err)
	}
	if _, code, err := runProxyCmd("stats", "--control", addr, "--json"); err != nil || code != 0 {
		t.Fatalf("stats over TCP: exit %d, %v", code, err)
	}
	// A wrong token: refused (exit 3, permission), nothing changed.
	wrong := filepath.Join(t.TempDir(), "other.token")
	if err := os.WriteFile(wrong, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, code, err = runProxyCmd("set", "--control", addr, "--token-file", wrong, "veth-a=loss 50%")
	if code != exitNoPerm || err == nil || !strings.Contains(err.Error(), "bearer token") {
		t.Fatalf("wrong token: exit %d, %v; want exit 3 naming the token", code, err)
	}
	// The token given explicitly works as the looked-up one.
	_, code, err = runProxyCmd("set", "--control", addr, "--token-file", control.TokenPath(dir, [2]string{"veth-a", "veth-b"}), "veth-a=delay 8ms")
	if err != nil || code != 0 {
		t.Fatalf("--token-file: exit %d, %v", code, err)
	}
	// No credentials for that address where we look: said before sending.
	proxyControlDir = t.TempDir()
	_, code, err = runProxyCmd("set", "--control", addr, "veth-a=loss 50%")
	if code == exitOK || err == nil || !strings.Contains(err.Error(), "listens on "+addr) {
		t.Fatalf("no token found: exit %d, %v", code, err)
	}
	if got := fake.Specs()["veth-a"]; got != "delay 8ms" {
		t.Fatalf("veth-a = %q, want delay 8ms", got)
	}
}

// TestProxySetReadsFilesOnTheCommandLine: `proxy set IFACE=@FILE` sends the
// file's contents; the proxy only ever sees text.
func TestProxySetReadsFilesOnTheCommandLine(t *testing.T) {
	fake, _ := startFake(t)
	f := filepath.Join(t.TempDir(), "spec.txt")
	if err := os.WriteFile(f, []byte("delay 42ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code, err := runProxyCmd("set", "veth-a=@"+f)
	if err != nil || code != 0 || out != "veth-a=delay 42ms\n" {
		t.Fatalf("set @FILE: %q, exit %d, %v", out, code, err)
	}
	if fake.lastText != "delay 42ms" {
		t.Fatalf("the proxy received %q, want the file's contents", fake.lastText)
	}
	_, code, err = runProxyCmd("set", "veth-a=@"+f+".missing")
	if code != exitUsage || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: exit %d, %v", code, err)
	}
}

func TestParseImpairResolvesFiles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "spec.txt")
	if err := os.WriteFile(f, []byte("loss 1%"), 0o600); err != nil {
		t.Fatal(err)
	}
	specs, err := parseImpair([2]string{"a", "b"}, []string{"@" + f, "b=@" + f})
	if err != nil || specs[0] != "loss 1%" || specs[1] != "loss 1%" {
		t.Fatalf("parseImpair: %q, %v", specs, err)
	}
	if _, err := parseImpair([2]string{"a", "b"}, []string{"a=@/nonexistent/x"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/x") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{":9464": "127.0.0.1:9464", "0.0.0.0:9464": "0.0.0.0:9464", "": "", "[::1]:1": "[::1]:1"} {
		if got := loopbackByDefault(in); got != want {
			t.Errorf("loopbackByDefault(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestProxySetPrintsTheProxysWarnings: the warnings the proxy returns for
// a correlated probability go to stderr; stdout keeps IFACE=SPEC.
func TestProxySetPrintsTheProxysWarnings(t *testing.T) {
	fake, _ := startFake(t)
	fake.warn = map[string][]string{"veth-a": {"loss 10% 50% realizes about 0.108%, not 10%"}, "veth-b": {"other"}}
	var stdout, stderr bytes.Buffer
	app := &cli.App{Name: "wanlab", Writer: &stdout, ErrWriter: &stderr, ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: "proxy", Subcommands: []*cli.Command{proxySetCommand()}}}}
	if err := app.Run([]string{"wanlab", "proxy", "set", "veth-a=loss 10% 50%"}); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "veth-a=loss 10% 50%\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
	if stderr.String() != "warning: veth-a: loss 10% 50% realizes about 0.108%, not 10%\n" {
		t.Fatalf("stderr %q, want only the changed direction's warning", stderr.String())
	}
}

func TestSimulateJSONWarnings(t *testing.T) {
	out, err, code := runApp(context.Background(), "simulate", "--spec", "loss 10% 50%", "--packets", "2000", "--json")
	if err != nil || code != 0 {
		t.Fatalf("simulate: %v", err)
	}
	var res struct {
		Warnings []string `json:"warnings"`
		Realized []struct {
			Param    string  `json:"param"`
			Realized float64 `json:"realized"`
		} `json:"realized"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "loss gemodel") ||
		len(res.Realized) != 1 || res.Realized[0].Param != "loss" || res.Realized[0].Realized > 0.0012 {
		t.Fatalf("simulate --json: %+v", res)
	}
	out, _, _ = runApp(context.Background(), "simulate", "--spec", "loss 10%", "--packets", "2000", "--json")
	if !strings.Contains(out, `"warnings": []`) {
		t.Fatalf("uncorrelated spec: want an empty warnings list:\n%s", out)
	}
}
