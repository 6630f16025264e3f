package pcapfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a regular file of at least mapMin bytes read-only, or
// returns nil (a pipe, a device, a small file, or no mmap).
func mapFile(f *os.File) []byte {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < mapMin || int64(int(fi.Size())) != fi.Size() {
		return nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return m
}

func unmap(m []byte) {
	if m != nil {
		_ = unix.Munmap(m)
	}
}

// slideMap prepares the chunk after the one holding mpos (its page
// tables filled in one call rather than a fault every few pages) and
// releases the chunks before it: the frames there have been passed on.
// It returns the offset at which to slide again.
func slideMap(m []byte, mpos int) int {
	c := mpos / mapChunk * mapChunk
	if c > 0 {
		_ = unix.Madvise(m[:c], unix.MADV_DONTNEED)
	}
	if next := c + mapChunk; next < len(m) {
		// Errors (a kernel before 5.14) leave the pages to fault in.
		_ = unix.Madvise(m[next:min(next+mapChunk, len(m))], unix.MADV_POPULATE_READ)
	}
	if c == 0 {
		_ = unix.Madvise(m[:min(mapChunk, len(m))], unix.MADV_POPULATE_READ)
	}
	return c + mapChunk
}
