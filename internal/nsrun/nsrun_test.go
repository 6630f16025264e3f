package nsrun_test

import (
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

func TestCreateDoDelete(t *testing.T) {
	name, h := testenv.NetNS(t)
	if !nsrun.Exists(name) {
		t.Fatalf("namespace %s not visible", name)
	}
	var links []netlink.Link
	err := nsrun.Do(h, func() error {
		var err error
		links, err = netlink.LinkList()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A fresh namespace has exactly one link: lo.
	if len(links) != 1 || links[0].Attrs().Name != "lo" {
		t.Fatalf("fresh namespace links = %v, want only lo", links)
	}
	// The test process itself must still be in its own namespace.
	self, _ := nsrun.Open("")
	defer self.Close()
	if self.Equal(h) {
		t.Fatal("process left in the test namespace")
	}
	if _, err := nsrun.Create(name); err == nil {
		t.Fatal("creating an existing namespace succeeded")
	}
	h.Close()
	if err := nsrun.Delete(name); err != nil {
		t.Fatal(err)
	}
	if nsrun.Exists(name) {
		t.Fatal("namespace still exists after Delete")
	}
	if err := nsrun.Delete(name); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	_ = os.Getpid()
}
