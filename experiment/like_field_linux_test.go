package experiment

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/internal/testenv"
)

// fieldDir holds the public captures other people made
// (../shared/captures/field beside the clone, as in CI).
const fieldDir = "../../shared/captures/field"

// fieldCapture is the path of a field capture, or a skip (a failure under
// CI) where the captures are not beside the clone.
func fieldCapture(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(fieldDir, name)
	if _, err := os.Stat(p); err != nil {
		testenv.Skip(t, "the field captures are not beside the clone: %v", err)
	}
	return p
}

// likeFieldDeadline bounds one field reproduction: the two below take a
// few seconds each (a calibration run at most besides).
const likeFieldDeadline = 90 * time.Second

// TestLikeFieldCaptures runs --like on two transfers other people
// captured: an SMTP upload from a sandboxed client whose application sent
// in bursts between the server's replies (the lab turns the roles round
// and paces its server's writes), and a page load of keep-alive requests
// over eight connections, captured behind a NAT (the fit withheld the
// round trip: the lab takes the capture's own). Every run completes and
// writes like.json with the verdict and what the capture did not show;
// the figures (within Pantheon's 15 % on an idle host) are logged, the
// test holds only what holds on a loaded one.
func TestLikeFieldCaptures(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		file      string
		direction string
		notShown  string // an entry's What the lab must name
	}{
		{"sv-mime-stream-depth.pcap", "upload", "the application's pace"},
		{"zeek-bro.org.pcap", "request-response", "the server's think time"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			capture := fieldCapture(t, tc.file)
			lr, err := Like(context.Background(), capture, Config{Out: filepath.Join(t.TempDir(), "like")}, fit.Options{},
				LikeOptions{Deadline: likeFieldDeadline})
			if err != nil {
				t.Fatal(err)
			}
			defer assertTornDown(t, lr.Run.LabID)
			v := lr.Verdict
			t.Logf("%s: %s %.4g against %.4g (error %.1f %%), RTT %.4g against %.4g ms (error %.1f %%); not shown: %+v",
				tc.file, v.Measure, v.Reproduced, v.Original, v.Error*100, v.RTTReproducedMs, v.RTTOriginalMs, v.RTTError*100, lr.NotShown)
			if lr.Fit.Transfer.Direction != tc.direction {
				t.Fatalf("fit: %s, want %s", lr.Fit.Transfer.Direction, tc.direction)
			}
			if v.Original <= 0 || v.Reproduced <= 0 || v.RTTOriginalMs <= 0 || v.RTTReproducedMs <= 0 {
				t.Errorf("verdict: %+v: want both sides measured", v)
			}
			// Half or twice the original is a lab that reproduced another
			// transfer (the SMTP upload as a bulk one ran ten times as
			// fast), whatever the host's load.
			if v.Error > 0.5 {
				t.Errorf("verdict: %s error %.2f: another transfer than the original", v.Measure, v.Error)
			}
			var names []string
			for _, n := range lr.NotShown {
				names = append(names, n.What)
				if n.Assumed == "" || n.Why == "" {
					t.Errorf("not shown %q: want the value assumed and why", n.What)
				}
			}
			if !strings.Contains(strings.Join(names, "|"), tc.notShown) {
				t.Errorf("not shown: %q, want %q among them", names, tc.notShown)
			}
			b, err := os.ReadFile(lr.JSON)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"verdict", "not_shown", "reproduced", "similarity"} {
				if _, ok := doc[k]; !ok {
					t.Errorf("like.json has no %q", k)
				}
			}
		})
	}
}
