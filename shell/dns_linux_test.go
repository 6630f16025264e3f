package shell_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/shell/shelltest"
)

// relayClientEnv makes the test binary, run as a shell's command, the
// client of TestShellRelaysLoopbackResolver.
const relayClientEnv = "WANLAB_TEST_RELAY_CLIENT"

func TestMain(m *testing.M) {
	if addr := os.Getenv(relayClientEnv); addr != "" {
		os.Exit(relayClient(addr))
	}
	os.Exit(m.Run())
}

// relayClient asks addr once over UDP and once over TCP, printing each
// answer and its round trip.
func relayClient(addr string) int {
	for _, network := range []string{"udp", "tcp"} {
		c, err := net.DialTimeout(network, addr, 5*time.Second)
		if err != nil {
			fmt.Println(network, "error", err)
			return 1
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		buf := make([]byte, 64)
		n := 0
		if _, err = c.Write([]byte("query")); err == nil {
			n, err = c.Read(buf)
		}
		c.Close()
		if err != nil {
			fmt.Println(network, "error", err)
			return 1
		}
		fmt.Println(network, string(buf[:n]), time.Since(start).Milliseconds())
	}
	return 0
}

// TestShellRelaysLoopbackResolver: a nameserver on a loopback address of
// the host (systemd-resolved's 127.0.0.53) answers the command inside the
// shell, over UDP and TCP, through the impaired link.
func TestShellRelaysLoopbackResolver(t *testing.T) {
	w := shelltest.New(t)
	before := w.State(t)
	const server = "127.0.0.53:53"
	var pc net.PacketConn
	var ln net.Listener
	w.Host.Do(t, func() error {
		var err error
		if pc, err = net.ListenPacket("udp", server); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", server)
		return err
	})
	t.Cleanup(func() { pc.Close(); ln.Close() })
	go func() { // answers "answer:" + the query
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("answer:"), buf[:n]...), from)
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			if n, err := c.Read(buf); err == nil {
				c.Write(append([]byte("answer:"), buf[:n]...))
			}
			c.Close()
		}
	}()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.53\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, code := w.Run(t, "shell", "--impair", "delay 25ms", "--resolv-conf", resolv, "--",
		"/usr/bin/env", relayClientEnv+"="+server, self)
	if code != 0 {
		t.Fatalf("relay client in the shell: exit %d\n%s", code, out)
	}
	for _, network := range []string{"udp", "tcp"} {
		var ms int
		var answer string
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, network+" ") {
				line = l
			}
		}
		if _, err := fmt.Sscanf(line, network+" %s %d", &answer, &ms); err != nil || answer != "answer:query" {
			t.Errorf("%s through the relay: %q, want answer:query", network, line)
			continue
		}
		// One round trip of the link (50 ms) at least: the query went
		// through it.
		if ms < 50 {
			t.Errorf("%s answer after %d ms: want at least the link's round trip, 50 ms", network, ms)
		}
	}
	w.RequireState(t, before, "host not restored after the shell with a relay")
}
