package kernel

import (
	"fmt"

	"github.com/wanlab/wanlab/internal/host"
)

// prepare checks t, fills in its defaults and names its namespace.
func (t Target) prepare() (Target, error) {
	t, err := t.withDefaults()
	if err != nil {
		return t, err
	}
	return t.resolve(), nil
}

// resolve gives a Target with Netns "" the name of the namespace the
// calling thread is in when it has one ("ip netns exec lab wanlab kernel
// apply ..." is then the same as --netns lab and shares its record), and
// keeps the records of unnamed namespaces apart by inode.
func (t Target) resolve() Target {
	if t.Netns != "" || t.anon != "" {
		return t
	}
	id := host.CurrentNetns()
	t.Netns = id.Name
	if id.Inode != 0 {
		t.anon = fmt.Sprintf("netns%d", id.Inode)
	}
	return t
}
