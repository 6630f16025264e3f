package netemdist

import (
	"crypto/md5"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestDistTablesMatchIproute2 compares the generated tables with the
// output of iproute2's own generators: the digests are md5 of the values
// one per line, from
//
//	gcc -o normal netem/normal.c -lm && ./normal | grep -v '^#' | tr -s ' \n' '\n' | grep -v '^$' | md5sum
//
// (same for pareto.c and paretonormal.c, iproute2 at the mirrored HEAD).
func TestDistTablesMatchIproute2(t *testing.T) {
	want := map[spec.Distribution]struct {
		md5   string
		first []int16
	}{
		spec.DistNormal:       {"90f5b6f1d51630b48f13bfc0ba46787a", []int16{-32768, -28307, -26871, -25967}},
		spec.DistPareto:       {"5436748013ce8536c912dde45743c351", []int16{-5461, -5460, -5460, -5459}},
		spec.DistParetoNormal: {"3dd12db0dc906acc57a846cb8c8edaf4", []int16{-12305, -11171, -10812, -10586}},
	}
	for d, w := range want {
		tab := Table(d)
		if len(tab) != Size {
			t.Fatalf("%v: %d entries, want %d", d, len(tab), Size)
		}
		var b strings.Builder
		for _, v := range tab {
			b.WriteString(strconv.Itoa(int(v)))
			b.WriteByte('\n')
		}
		sum := md5.Sum([]byte(b.String()))
		if got := hex.EncodeToString(sum[:]); got != w.md5 {
			t.Errorf("%v: table md5 %s, want %s (first values %v, want %v)", d, got, w.md5, tab[:4], w.first)
		}
	}
	if Table(spec.DistUniform) != nil {
		t.Error("uniform must have no table (the kernel's built-in default)")
	}
}
