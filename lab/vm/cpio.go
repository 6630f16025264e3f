package vm

import (
	"fmt"
	"io"
	"io/fs"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks an
// initramfs from (usr/gen_init_cpio.c, init/initramfs.c): a 110-byte ASCII
// header per entry, the name and the data each padded to 4 bytes, and a
// TRAILER!!! entry. Several such archives concatenated are one initramfs,
// which is how the wanlab binary is added at boot without rebuilding the
// rest.
type cpioWriter struct {
	w   io.Writer
	ino uint32
	err error
}

func (c *cpioWriter) header(name string, mode uint32, size int) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name + "\x00"))
	c.pad(len(hdr) + len(name) + 1)
}

func (c *cpioWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

func (c *cpioWriter) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// dir adds a directory.
func (c *cpioWriter) dir(name string) { c.header(name, 0o040755, 0) }

// file adds a regular file with the given permission bits.
func (c *cpioWriter) file(name string, perm fs.FileMode, data []byte) {
	c.header(name, 0o100000|uint32(perm.Perm()), len(data))
	c.write(data)
	c.pad(len(data))
}

// symlink adds a symbolic link name -> target.
func (c *cpioWriter) symlink(name, target string) {
	c.header(name, 0o120777, len(target))
	c.write([]byte(target))
	c.pad(len(target))
}

// close writes the trailer and returns the first error.
func (c *cpioWriter) close() error {
	c.header("TRAILER!!!", 0, 0)
	return c.err
}
