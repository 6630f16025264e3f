package host

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// NetnsID names the network namespace the calling thread is in: by the
// name it has under /run/netns ("ip netns exec lab ..." is then the same
// as --netns lab), or, for an unnamed namespace other than the process's
// own, by its inode. Both are zero in the process's own namespace when it
// has no name.
type NetnsID struct {
	Name  string
	Inode uint64 // set only for an unnamed namespace that is not the process's own
}

// CurrentNetns identifies the calling thread's network namespace.
func CurrentNetns() NetnsID {
	cur, err := NetnsInode("")
	if err != nil {
		return NetnsID{}
	}
	entries, _ := os.ReadDir(nsrun.Dir)
	for _, e := range entries {
		if ino, err := NetnsInode(e.Name()); err == nil && ino == cur {
			return NetnsID{Name: e.Name()}
		}
	}
	if own, err := inode("/proc/self/ns/net"); err == nil && own != cur {
		return NetnsID{Inode: cur}
	}
	return NetnsID{}
}

// NetnsInode returns the inode of the named namespace, or of the calling
// thread's for "".
func NetnsInode(name string) (uint64, error) {
	if name == "" {
		return inode("/proc/thread-self/ns/net")
	}
	return inode(filepath.Join(nsrun.Dir, name))
}

func inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
