package route

import (
	"fmt"

	hostenv "github.com/wanlab/wanlab/internal/host"
)

// resolveNetns gives a Config with Netns "" the name of the namespace the
// calling thread is in when it has one (a proxy started with "ip netns
// exec lab wanlab proxy ..." is then the same as one with --netns lab, and
// "wanlab proxy cleanup" from the host finds it). An unnamed namespace
// other than the process's own is told apart by its inode.
func resolveNetns(cfg Config) Config {
	if cfg.Netns != "" || cfg.anonNetns != 0 {
		return cfg
	}
	id := hostenv.CurrentNetns()
	cfg.Netns, cfg.anonNetns = id.Name, id.Inode
	return cfg
}

// targetInode is the inode of the namespace a state refers to, as seen
// from here: the named one, or the calling thread's.
func targetInode(netns string) (uint64, error) { return hostenv.NetnsInode(netns) }

// checkNetns refuses to undo a state in a namespace other than the one it
// was made in (its sysctls would be written to the wrong host).
func checkNetns(path string, st *state) error {
	if st.NetnsInode == 0 {
		return nil
	}
	cur, err := targetInode(st.Netns)
	if err != nil || cur == st.NetnsInode {
		return nil
	}
	where := "this namespace"
	if st.Netns != "" {
		where = fmt.Sprintf("the namespace now named %s", st.Netns)
	}
	return fmt.Errorf("state %s belongs to network namespace %d, not %s (%d): run cleanup inside it, or remove the file if that namespace is gone",
		path, st.NetnsInode, where, cur)
}
