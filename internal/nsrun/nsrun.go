// Package nsrun creates, enters and removes named network namespaces, and
// runs a function inside one on a locked OS thread, so that sockets, netlink
// handles and /proc/sys writes made by the function belong to that
// namespace while the rest of the process stays where it was.
package nsrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"
)

// Dir is where iproute2 and this package bind-mount named namespaces.
const Dir = "/var/run/netns"

// Create makes a new named network namespace, visible to `ip netns` as
// name, and returns a handle to it. The calling goroutine's namespace is
// left unchanged. The caller owns the handle and must Close it.
func Create(name string) (netns.NsHandle, error) {
	if err := ensureShared(Dir); err != nil {
		return netns.None(), fmt.Errorf("netns %s: create: %w", name, err)
	}
	if _, err := os.Stat(filepath.Join(Dir, name)); err == nil {
		return netns.None(), fmt.Errorf("netns %s: already exists", name)
	}
	var h netns.NsHandle
	err := onNewThread(func() error {
		var err error
		h, err = netns.NewNamed(name)
		return err
	})
	if err != nil {
		return netns.None(), fmt.Errorf("netns %s: create: %w", name, err)
	}
	return h, nil
}

// Open returns a handle to the named namespace; "" means the namespace this
// process started in.
func Open(name string) (netns.NsHandle, error) {
	if name == "" {
		h, err := netns.GetFromPid(os.Getpid())
		if err != nil {
			return netns.None(), fmt.Errorf("netns of pid %d: %w", os.Getpid(), err)
		}
		return h, nil
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		return netns.None(), fmt.Errorf("netns %s: %w", name, err)
	}
	return h, nil
}

// Delete removes a named namespace. A namespace that does not exist is not
// an error, so Delete is safe in cleanup paths. The processes left inside
// it are stopped first (SIGTERM, then SIGKILL after two seconds): kept
// alive by them, it would outlive its name, unreachable.
func Delete(name string) error {
	if _, err := stopProcesses(name); err != nil {
		return fmt.Errorf("netns %s: stop its processes: %w", name, err)
	}
	err := netns.DeleteNamed(name)
	if errors.Is(err, syscall.EINVAL) && Exists(name) {
		// Not a mount point: an earlier Delete unmounted it and could not
		// remove the file, which may work now.
		err = os.Remove(filepath.Join(Dir, name))
	}
	if errors.Is(err, syscall.EBUSY) {
		// The file is still a mount point below another mount: Dir was
		// bind-mounted onto itself (the first `ip netns add` on a host
		// does) while the namespace was bound in it, so it is mounted on
		// the directory below as well, out of reach by name until that
		// bind goes (see ensureShared).
		return fmt.Errorf("netns %s: delete: %w (also mounted below a later bind mount of %s onto itself, as a first `ip netns add` makes)", name, err, Dir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns %s: delete: %w", name, err)
	}
	return nil
}

// Exists reports whether a named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(filepath.Join(Dir, name))
	return err == nil
}

// Do runs fn on a locked OS thread that has entered ns. A handle of
// netns.None() (or a closed one) runs fn in the current namespace. fn must
// not start goroutines that depend on the namespace: they run on other
// threads. Sockets and netlink handles it opens stay bound to ns.
func Do(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		return fn()
	}
	return onNewThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("enter netns: %w", err)
		}
		return fn()
	})
}

// DoNamed is Do for a namespace given by name ("" = the current one).
func DoNamed(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	h, err := Open(name)
	if err != nil {
		return err
	}
	defer h.Close()
	return Do(h, fn)
}

// onNewThread runs fn in a fresh goroutine locked to its OS thread. Afterwards
// the thread is moved back to the namespace it started in and released; if
// that fails it stays locked, and the runtime terminates it when the
// goroutine exits, so no goroutine ever runs in a namespace it did not ask
// for. (The Go runtime creates new threads from a template thread when the
// creating one is locked, so threads never inherit fn's namespace.)
func onNewThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current netns: %w", err)
			return
		}
		defer orig.Close()
		ferr := fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}
