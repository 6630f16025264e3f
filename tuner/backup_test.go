package tuner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTamperedBackupIsRefused: tune revert (and apply, which extends the
// backup) validate the backup before using it: a key outside Keys (a
// "../" path through /proc/sys) is refused naming the file and the field,
// and nothing is written.
func TestTamperedBackupIsRefused(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ entries, field string }{
		{`{"key":"../../..` + victim + `","raw":"owned\n"}`, "entries[1].key"},
		{`{"key":"kernel.core_pattern","raw":"|/bin/sh\n"}`, "entries[1].key"},
		{`{"key":"net.ipv4.tcp_available_congestion_control","raw":"x\n"}`, "entries[1].key"},
		{`{"key":"net.core.rmem_max","raw":"1\n"}`, "entries[1].key"},
	} {
		p := fixture(t, "linux618")
		orig := tree(t, p.Root)
		tu := &Tuner{FS: p, BackupDir: t.TempDir()}
		body := `{"netns":"","kernel":"6.18","created":"2026-01-01T00:00:00Z","entries":[` +
			`{"key":"net.core.rmem_max","raw":"212992\n"},` + tc.entries + `]}`
		if err := os.WriteFile(tu.BackupPath(), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"revert", "apply"} {
			var err error
			if op == "revert" {
				_, err = tu.Revert(false)
			} else {
				_, err = tu.Apply([]Assignment{{"net.core.wmem_max", "16777216"}}, false)
			}
			if err == nil || !strings.Contains(err.Error(), tu.BackupPath()) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s with %s: %v; want a refusal naming the file and %s", op, tc.entries, err, tc.field)
			}
		}
		got := tree(t, p.Root)
		for k, v := range orig {
			if got[k] != v {
				t.Errorf("%s: %s written (%q) from a refused backup", tc.entries, k, got[k])
			}
		}
		if b, _ := os.ReadFile(tu.BackupPath()); string(b) != body {
			t.Errorf("the refused backup was changed")
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("victim overwritten: %q", b)
	}
}

func FuzzParseBackup(f *testing.F) {
	f.Add([]byte(`{"netns":"blue","kernel":"6.18","entries":[{"key":"net.ipv4.tcp_rmem","raw":"4096\t131072\t6291456\n"}]}`))
	f.Add([]byte(`{"entries":[{"key":"../x","raw":""}]}`))
	f.Add([]byte(`{"netns":"../../x","entries":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBackup(data)
		if err != nil {
			return
		}
		for _, e := range b.Entries {
			if k, ok := LookupKey(e.Key); !ok || k.ReadOnly || strings.Contains(e.Key, "/") {
				t.Fatalf("accepted key %q", e.Key)
			}
		}
		if strings.Contains(b.Netns, "/") {
			t.Fatalf("accepted netns %q", b.Netns)
		}
	})
}
