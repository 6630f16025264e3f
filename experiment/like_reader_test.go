package experiment

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/fit"
)

// TestLikeSummarySaysReadInPart: a reproduction of a capture the reader
// gave up on says so in --like's summary, and its capture's name is
// printed escaped.
func TestLikeSummarySaysReadInPart(t *testing.T) {
	stopped := "x.pcap: after packet 91: file ends in the middle of a packet record"
	res := &LikeResult{Capture: "/tmp/\x1b[2Jx.pcap", Side: "server", Run: &Result{Out: "/tmp/out/reproduction"},
		Fit: &fit.Result{ReadStopped: stopped, ReaderWarnings: []string{"read in part, fitted on its first 91 frames: " + stopped}}}
	var b bytes.Buffer
	if err := WriteLikeSummary(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "warning: the capture was read in part ("+stopped+")") {
		t.Errorf("summary does not say the capture was read in part:\n%s", b.String())
	}
	if strings.Contains(b.String(), "\x1b") || !strings.Contains(b.String(), `"/tmp/\x1b[2Jx.pcap"`) {
		t.Errorf("capture name not escaped:\n%q", b.String())
	}
}
