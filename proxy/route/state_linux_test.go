package route

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodState = `{"version":1,"pid":1,"started":"2026-01-01T00:00:00Z","netns":"ns1",
"ifaces":["ra","rb"],"tuns":["wl-ra","wl-rb"],"changes":[
{"kind":"sysctl","path":"net/ipv4/conf/ra/forwarding","prev":"0","value":"1"},
{"kind":"mtu","link":"wl-ra","prev_mtu":1500,"mtu":9000},
{"kind":"up","link":"wl-ra"},
{"kind":"addr_gen_mode","link":"wl-ra","prev_mode":0,"mode":1},
{"kind":"route","family":6,"table":100,"link":"wl-ra"},
{"kind":"rule","family":4,"table":100,"priority":50,"iif":"ra"}]}`

// TestTamperedStateFileIsRefused: proxy cleanup reads the journal's
// fields before it undoes anything; a path leading out of /proc/sys/net,
// an unknown kind or a bad name is refused with one line naming the file
// and the field, and nothing is written.
func TestTamperedStateFileIsRefused(t *testing.T) {
	if _, err := parseState([]byte(goodState)); err != nil {
		t.Fatalf("a proxy's own state: %v", err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, field string }{
		{`"net/ipv4/conf/ra/forwarding"`, `"../../..` + victim + `"`, "changes[0]: path"},
		{`"net/ipv4/conf/ra/forwarding"`, `"net/ipv4/conf/../../../../etc/forwarding"`, "changes[0]: path"},
		{`"net/ipv4/conf/ra/forwarding"`, `"kernel/core_pattern"`, "changes[0]: path"},
		{`"prev":"0"`, `"prev":"|/bin/sh"`, "changes[0]: prev"},
		{`"kind":"up"`, `"kind":"exec"`, "changes[2]: kind"},
		{`"link":"wl-ra","prev_mtu"`, `"link":"../x","prev_mtu"`, "changes[1]: link"},
		{`"iif":"ra"`, `"iif":"a b"`, "changes[5]: iif"},
		{`"ifaces":["ra"`, `"ifaces":["this-name-is-too-long"`, "ifaces[0]"},
		{`"netns":"ns1"`, `"netns":"../../proc/1/ns/net"`, "netns"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "ra-rb"+stateSuffix)
		body := strings.Replace(goodState, tc.from, tc.to, 1)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		undone, err := Cleanup(dir)
		if err == nil || len(undone) != 0 || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.field) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Cleanup = %v, %v; want one line naming %s and %s", tc.to, undone, err, path, tc.field)
		}
		if b, rerr := os.ReadFile(path); rerr != nil || string(b) != body {
			t.Errorf("%s: the refused state file was changed or removed: %v", tc.to, rerr)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("victim overwritten: %q", b)
	}
}

func FuzzParseState(f *testing.F) {
	f.Add([]byte(goodState))
	f.Add([]byte(`{"version":1,"ifaces":["a","b"],"changes":[{"kind":"sysctl","path":"net/ipv6/conf/all/forwarding","prev":"0"}]}`))
	f.Add([]byte(`{"version":1,"ifaces":["a","b"],"changes":[{"kind":"addr_gen_mode","link":"a"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseState(b)
		if err != nil {
			return
		}
		// What is accepted only ever names sysctls under net/*/conf/ and
		// valid interfaces.
		for _, c := range st.Changes {
			if strings.Contains(c.Path, "..") || (c.Kind == kindSysctl && !strings.HasPrefix(c.Path, "net/ipv")) {
				t.Fatalf("accepted %+v", c)
			}
			if c.Kind == kindAddrGenMode && c.PrevMode == nil {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}
