package lab

import (
	"strings"
	"testing"
)

// TestTamperedLabStateIsRefused: Cleanup deletes only the namespaces of
// the lab the state file names, and links with valid names.
func TestTamperedLabStateIsRefused(t *testing.T) {
	good := `{"id":"ab12","pid":1,"namespaces":["wanlab-ab12-router","wanlab-ab12-client"],` +
		`"links":{"wanlab-ab12-router":["r-c","r-s"],"wanlab-ab12-client":["c-r"]}}`
	if _, err := parseState([]byte(good)); err != nil {
		t.Fatalf("a lab's own state: %v", err)
	}
	for _, tc := range []struct{ from, to, field string }{
		{`"id":"ab12"`, `"id":"../x"`, "id"},
		{`"namespaces":["wanlab-ab12-router"`, `"namespaces":["../../etc/passwd"`, "namespaces[0]"},
		{`"namespaces":["wanlab-ab12-router"`, `"namespaces":["wanlab-cd34-router"`, "namespaces[0]"},
		{`["c-r"]`, `["c/r"]`, "links"},
		{`"wanlab-ab12-client":["c-r"]`, `"other":["c-r"]`, "links"},
	} {
		_, err := parseState([]byte(strings.Replace(good, tc.from, tc.to, 1)))
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.to, err, tc.field)
		}
	}
}

func FuzzParseLabState(f *testing.F) {
	f.Add([]byte(`{"id":"ab12","namespaces":["wanlab-ab12-router"],"links":{"wanlab-ab12-router":["r-c"]}}`))
	f.Add([]byte(`{"id":"ab12","namespaces":["x"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseState(b)
		if err != nil {
			return
		}
		for _, ns := range st.Namespaces {
			if !strings.HasPrefix(ns, "wanlab-"+st.ID+"-") || strings.Contains(ns, "/") {
				t.Fatalf("accepted namespace %q", ns)
			}
		}
	})
}
