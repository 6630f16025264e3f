package vm

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestCpioReadByBusybox writes an archive and lists it with busybox's
// cpio, an independent reader of the newc format.
func TestCpioReadByBusybox(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed")
	}
	var b bytes.Buffer
	c := &cpioWriter{w: &b}
	c.dir("etc")
	c.file("etc/odd", 0o644, []byte("abc")) // data needs padding
	c.file("etc/even", 0o755, []byte("abcd"))
	c.symlink("bin/sh", "/bin/busybox")
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 {
		t.Errorf("archive of %d bytes, not 4-aligned", b.Len())
	}
	cmd := exec.Command(bb, "cpio", "-tv")
	cmd.Stdin = &b
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("busybox cpio -t: %v: %s", err, out)
	}
	for _, want := range []string{"drwxr-xr-x", "etc/odd", "-rwxr-xr-x", "etc/even", "bin/sh -> /bin/busybox"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
}
