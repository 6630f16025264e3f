package container

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
)

// docker runs the Docker CLI against the daemon the test command started
// (WANLAB_DOCKER_HOST), or the default one.
type docker struct {
	bin  string
	host string
}

// newDocker finds a docker CLI and a daemon that answers; without them the
// test skips (fails under CI, where the test command starts dockerd).
func newDocker(t *testing.T) *docker {
	t.Helper()
	testenv.RequireRoot(t)
	d := &docker{bin: os.Getenv("WANLAB_DOCKER"), host: os.Getenv("WANLAB_DOCKER_HOST")}
	if d.bin == "" {
		if _, err := os.Stat("/usr/bin/docker"); err == nil {
			d.bin = "/usr/bin/docker" // Debian's docker.io, the daemon's own version
		} else if d.bin, err = exec.LookPath("docker"); err != nil {
			testenv.Skip(t, "docker not installed (the README's test command installs docker.io and starts dockerd)")
		}
	}
	if _, err := d.try(context.Background(), "version", "--format", "{{.Server.Version}}"); err != nil {
		testenv.Skip(t, "no Docker daemon answers (the README's test command starts one): %v", err)
	}
	return d
}

func (d *docker) cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, d.bin, args...)
	c.Env = os.Environ()
	if d.host != "" {
		c.Env = append(c.Env, "DOCKER_HOST="+d.host)
	}
	return c
}

// try runs docker and returns its standard output, or an error with its
// standard error.
func (d *docker) try(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	c := d.cmd(ctx, args...)
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (d *docker) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := d.try(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// image is the package's one build of the image, shared by its tests and
// removed by TestMain.
var image struct {
	once sync.Once
	tag  string
	d    *docker
	err  error
}

// buildImage builds the image with scripts/build-image.sh under a tag of
// the test run's own, once for the package (TestMain removes it).
func buildImage(t *testing.T, d *docker) string {
	t.Helper()
	image.once.Do(func() {
		tag := testenv.UniqueName("wanlab-test:t")
		script, err := filepath.Abs("../scripts/build-image.sh")
		if err != nil {
			image.err = err
			return
		}
		c := exec.Command(script, tag)
		c.Dir = filepath.Dir(filepath.Dir(script))
		c.Env = append(os.Environ(), "DOCKER="+d.bin)
		if d.host != "" {
			c.Env = append(c.Env, "DOCKER_HOST="+d.host)
		}
		if out, err := c.CombinedOutput(); err != nil {
			image.err = fmt.Errorf("scripts/build-image.sh: %v\n%s", err, out)
			return
		}
		image.tag, image.d = tag, d
	})
	if image.err != nil {
		t.Fatal(image.err)
	}
	return image.tag
}

func TestMain(m *testing.M) {
	code := m.Run()
	if image.tag != "" {
		image.d.try(context.Background(), "rmi", "-f", image.tag)
	}
	os.Exit(code)
}

// poll reports whether cond held before within passed.
func poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// waitFor polls cond until it holds or within passes (the containers'
// start-up takes seconds under load, longer than testenv.WaitFor's 10 s).
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
