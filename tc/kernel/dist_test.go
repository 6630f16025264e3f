package kernel

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestDistTablesMatchIproute2 compares the generated tables with the .dist
// files iproute2 installs, when they are present.
func TestDistTablesMatchIproute2(t *testing.T) {
	for _, d := range []spec.Distribution{spec.DistNormal, spec.DistPareto, spec.DistParetoNormal} {
		var file string
		for _, dir := range []string{"/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc", "/usr/lib64/tc", "/usr/share/tc"} {
			if _, err := os.Stat(dir + "/" + d.String() + ".dist"); err == nil {
				file = dir + "/" + d.String() + ".dist"
				break
			}
		}
		got := DistTable(d)
		if len(got) != 4096 {
			t.Fatalf("%v: %d entries", d, len(got))
		}
		if file == "" {
			t.Logf("%v: no iproute2 .dist file to compare with", d)
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var want []int16
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			for _, f := range strings.Fields(line) {
				v, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, int16(v))
			}
		}
		if len(want) != len(got) {
			t.Fatalf("%v: %d entries in %s, generated %d", d, len(want), file, len(got))
		}
		diffs := 0
		for i := range want {
			if want[i] != got[i] {
				if diffs < 5 {
					t.Errorf("%v[%d] = %d, %s has %d", d, i, got[i], file, want[i])
				}
				diffs++
			}
		}
		if diffs > 0 {
			t.Errorf("%v: %d of %d entries differ", d, diffs, len(want))
		}
	}
}
