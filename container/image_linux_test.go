package container

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestImageSaysWhatIsMissing runs the image without NET_ADMIN, without
// /dev/net/tun and without both: each time the proxy exits before it
// touches anything, with one line naming what is missing.
func TestImageSaysWhatIsMissing(t *testing.T) {
	d := newDocker(t)
	image := buildImage(t, d)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 3, "needs CAP_NET_ADMIN and /dev/net/tun"},
		{[]string{"--cap-add", "NET_ADMIN"}, 4, "needs /dev/net/tun: "},
		{[]string{"--device", "/dev/net/tun"}, 3, "needs CAP_NET_ADMIN: "},
	} {
		args := append([]string{"run", "--rm", "--network", "none", "-e", "WANLAB_IFACES=eth0,eth1"}, c.args...)
		var stderr bytes.Buffer
		cmd := d.cmd(context.Background(), append(args, image)...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		msg := strings.TrimSpace(stderr.String())
		if code != c.code || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 0 {
			t.Errorf("docker run %v: exit %d, %q; want exit %d and one line with %q", c.args, code, msg, c.code, c.want)
		}
	}
}
