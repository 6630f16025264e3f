package kernel

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// resolve gives a Target with Netns "" the name of the namespace the
// calling thread is in when it has one ("ip netns exec lab wanlab kernel
// apply ..." is then the same as --netns lab and shares its record), and
// keeps the records of unnamed namespaces apart by inode.
func (t Target) resolve() Target {
	if t.Netns != "" || t.anon != "" {
		return t
	}
	var cur unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &cur) != nil {
		return t
	}
	entries, _ := os.ReadDir(nsrun.Dir)
	for _, e := range entries {
		var st unix.Stat_t
		if unix.Stat(filepath.Join(nsrun.Dir, e.Name()), &st) == nil && st.Ino == cur.Ino {
			t.Netns = e.Name()
			return t
		}
	}
	var own unix.Stat_t
	if unix.Stat("/proc/self/ns/net", &own) == nil && own.Ino != cur.Ino {
		t.anon = fmt.Sprintf("netns%d", cur.Ino)
	}
	return t
}
