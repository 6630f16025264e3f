package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLikeBadCaptureCreatesNothing: `experiment --like` reads its capture
// before it makes anything, so a file that is no capture exits 2 naming
// the file (quoted when its name holds control characters, never with
// its bytes) and leaves no output directory, default or given.
func TestLikeBadCaptureCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	bad := filepath.Join(dir, "esc\x1b[31mred.pcap")
	if err := os.WriteFile(bad, []byte("root:$y$secret:20000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--like", bad},
		{"--like", bad, "--out", filepath.Join(dir, "out")},
	} {
		_, stderr, code := experimentCmd(t, nil, args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d: %s", args, code, exitUsage, stderr)
		}
		if !strings.Contains(stderr, `esc\x1b[31mred.pcap`) || strings.Contains(stderr, "\x1b") {
			t.Errorf("%q: stderr does not name the file escaped: %q", args, stderr)
		}
		for _, leak := range []string{"root", "secret", "746f6f72"} {
			if strings.Contains(stderr, leak) {
				t.Errorf("%q: stderr echoes the file's bytes (%q): %q", args, leak, stderr)
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%q: left %q behind", args, names)
		}
	}
}
