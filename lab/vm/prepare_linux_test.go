package vm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestNewestKernelPackage(t *testing.T) {
	out := "linux-image-6.1.0-9-cloud-amd64 - Linux 6.1 for x86-64 cloud (signed)\n" +
		"linux-image-6.1.0-10-cloud-amd64 - Linux 6.1 for x86-64 cloud (signed)\n" +
		"linux-image-6.1.0-10-cloud-amd64-dbg - Debug symbols\n" +
		"linux-image-6.1.0-11-amd64 - Linux 6.1 for 64-bit PCs (signed)\n"
	got, err := newestIn(out)
	if err != nil || got != "linux-image-6.1.0-10-cloud-amd64" {
		t.Errorf("newestIn = %q, %v; want the -10- cloud image", got, err)
	}
	if _, err := newestIn("linux-image-6.1.0-11-amd64 - not cloud\n"); err == nil {
		t.Error("no cloud image, no error")
	}
}

// TestModuleOrder reads the dependencies of the prepared kernel's modules:
// each comes after what it depends on, and built-ins are left out.
func TestModuleOrder(t *testing.T) {
	p, err := LoadPrepared("")
	if err != nil {
		// testenv.Skip, which this package's own tests cannot import.
		if os.Getenv("CI") != "" || os.Getenv("WANLAB_REQUIRE_PRIVILEGED") != "" {
			t.Fatalf("%v (the test command runs it)", err)
		}
		t.Skipf("%v", err)
	}
	modDir := filepath.Join(filepath.Dir(filepath.Dir(p.Kernel)), "lib", "modules", p.Release)
	order, err := moduleOrder(modDir, []string{"sch_netem", "virtio_net", "sch_fq_codel"})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(order))
	for i, f := range order {
		names[i] = modName(f)
	}
	pos := func(m string) int { return slices.Index(names, m) }
	if pos("sch_netem") < 0 || pos("virtio_net") < 0 || pos("virtio") < 0 || pos("virtio") > pos("virtio_net") {
		t.Errorf("order %v: want virtio before virtio_net, and sch_netem", names)
	}
	if pos("sch_fq_codel") >= 0 {
		t.Errorf("order %v: sch_fq_codel is built in", names)
	}
	if _, err := moduleOrder(modDir, []string{"no_such_module"}); err == nil {
		t.Error("a missing module was not reported")
	}
}
