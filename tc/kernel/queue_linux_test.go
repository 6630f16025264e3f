package kernel

import (
	"errors"
	"os"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/tc/spec"
)

// TestFIFOChildApplyShowClear applies pfifo and bfifo as tbf's child
// (parent 1:1) and alone, on this host's kernel, and reads them back
// from the kernel's own values.
func TestFIFOChildApplyShowClear(t *testing.T) {
	testenv.RequireRoot(t)
	tg := newTarget(t)
	before := tree(t, tg)
	for _, s := range []string{
		"pfifo limit 100",
		"bfifo limit 64kb",
		"pfifo",
		"tbf rate 10mbit burst 10kb limit 1mb | pfifo limit 50",
	} {
		sp := mustParse(t, s)
		if err := Apply(tg, spec.PipelineImpairment(sp)); err != nil {
			t.Fatalf("apply %s: %v", s, err)
		}
		rec, err := loadRecord(tg.recordPath())
		if err != nil {
			t.Fatal(err)
		}
		// With the record out of the way, Show has only the kernel to read.
		if err := os.Rename(tg.recordPath(), tg.recordPath()+".hidden"); err != nil {
			t.Fatal(err)
		}
		decoded, err := Show(tg)
		if rerr := os.Rename(tg.recordPath()+".hidden", tg.recordPath()); rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if decoded != sp.String() {
			t.Errorf("decoded from the kernel %q = %q\n%s", sp, decoded, tree(t, tg))
		}
		if rec == nil || len(rec.Handles) != len(sp.Stages) {
			t.Errorf("record: %+v", rec)
		}
	}
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, tg); after != before {
		t.Fatalf("clear did not restore:\nbefore %s\nafter  %s", before, after)
	}
}

// TestAQMOnThisKernel applies each AQM kind on this host's kernel: where
// the kernel has it, it reads back as applied; where it lacks it (this
// machine's has none of them), apply says which kind is missing and
// changes nothing.
func TestAQMOnThisKernel(t *testing.T) {
	testenv.RequireRoot(t)
	tg := newTarget(t)
	before := tree(t, tg)
	for _, s := range []string{"codel", "fq_codel target 10ms", "pie", "red limit 400kb avpkt 1000",
		"tbf rate 10mbit burst 10kb limit 1mb | fq_codel"} {
		sp := mustParse(t, s)
		err := Apply(tg, spec.PipelineImpairment(sp))
		var nk *NoKindError
		switch {
		case errors.As(err, &nk):
			if last := sp.Stages[len(sp.Stages)-1].Kind(); nk.Kind != last {
				t.Errorf("%s: missing kind %q, want %q", s, nk.Kind, last)
			}
			if after := tree(t, tg); after != before {
				t.Errorf("%s refused, yet the tree changed:\nbefore %s\nafter  %s", s, before, after)
			}
		case err != nil:
			t.Errorf("apply %s: %v", s, err)
		default:
			if got, err := Show(tg); err != nil || got != sp.String() {
				t.Errorf("show after apply %s: %q %v", s, got, err)
			}
			if err := Clear(tg); err != nil {
				t.Fatal(err)
			}
		}
	}
}
