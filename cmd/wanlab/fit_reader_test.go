package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFitSaysTheCaptureWasReadInPart: `wanlab fit --json` of a capture
// cut mid-record fits what came before, says so on stderr, and carries
// read_stopped and the reader's warning in its JSON; the whole file has
// neither.
func TestFitSaysTheCaptureWasReadInPart(t *testing.T) {
	b, err := os.ReadFile(analyzeCapture)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(cut, b[:len(b)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		part bool
	}{{analyzeCapture, false}, {cut, true}} {
		app := newApp()
		var out, errb bytes.Buffer
		app.Writer, app.ErrWriter = &out, &errb
		if err := app.Run([]string{"wanlab", "fit", "--json", c.path}); err != nil {
			t.Fatalf("fit %s: %v", c.path, err)
		}
		var doc struct {
			ReadStopped    string   `json:"read_stopped"`
			ReaderWarnings []string `json:"reader_warnings"`
			Notes          []string `json:"notes"`
		}
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatalf("fit --json %s: %v", c.path, err)
		}
		said := strings.Contains(errb.String(), "warning: the capture was read in part")
		if said != c.part || (doc.ReadStopped != "") != c.part || (len(doc.ReaderWarnings) > 0) != c.part {
			t.Errorf("%s (read in part: %v): stderr %q, read_stopped %q, reader_warnings %q", c.path, c.part, errb.String(), doc.ReadStopped, doc.ReaderWarnings)
		}
		if c.part && !strings.Contains(doc.ReadStopped, "ends in the middle of a packet record") {
			t.Errorf("read_stopped %q does not say the file ends mid-record", doc.ReadStopped)
		}
	}
}
