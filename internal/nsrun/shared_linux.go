package nsrun

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ensureShared makes dir a shared mount point, bind-mounting it onto
// itself the first time, as iproute2's `ip netns add` does (netns_add in
// ip/ipnetns.c). While dir is a plain directory, the first `ip netns add`
// on the host makes that bind, recursively, and every namespace bound in
// dir before it ends up mounted twice: on the directory below and on the
// bind above. Deleting one by name then unmounts only the upper copy and
// its file stays busy. Done here first, a later `ip netns add` finds the
// mount point and binds nothing. Processes of this package take turns
// under a lock on dir, so the bind comes before any namespace of theirs;
// a dir that already holds namespaces (of an older run, or of a process
// that binds them without this) is left a plain directory, as binding
// over them would make the same double mounts.
func ensureShared(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netns directory: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("netns directory: %w", err)
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer unix.Flock(int(d.Fd()), unix.LOCK_UN)
	err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if !errors.Is(err, unix.EINVAL) {
		if err != nil {
			return fmt.Errorf("make %s a shared mount: %w", dir, err)
		}
		return nil
	}
	// EINVAL: not a mount point yet.
	if names, err := d.Readdirnames(1); err != nil && len(names) == 0 && !errors.Is(err, io.EOF) {
		return fmt.Errorf("netns directory: %w", err)
	} else if len(names) > 0 {
		return nil
	}
	if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return nil
}
