package route

import (
	"os"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// openTUN creates a non-persistent TUN device in n: it disappears when
// the returned file is closed, as when its process dies.
func openTUN(t *testing.T, n *testenv.Node, name string) *os.File {
	t.Helper()
	f, err := openTUNIn(n.NS, name)
	if err != nil {
		t.Fatalf("TUN %s: %v", name, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func openTUNIn(ns netns.NsHandle, name string) (*os.File, error) {
	var f *os.File
	err := nsrun.Do(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return err
		}
		f = os.NewFile(uintptr(fd), name)
		return nil
	})
	return f, err
}
