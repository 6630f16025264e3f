package kernel

import (
	"os"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
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
		if err := Apply(tg, sp); err != nil {
			t.Fatalf("apply %s: %v", s, err)
		}
		rec, _ := loadRecord(tg.recordPath())
		os.Rename(tg.recordPath(), tg.recordPath()+".hidden")
		decoded, err := Show(tg)
		os.Rename(tg.recordPath()+".hidden", tg.recordPath())
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
