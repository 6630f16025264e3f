//go:build unix

package host

import "golang.org/x/sys/unix"

// KernelRelease is the release of the kernel this process runs on, as
// `uname -r` prints it.
func KernelRelease() string {
	var uts unix.Utsname
	_ = unix.Uname(&uts) // fails only on a bad pointer
	return unix.ByteSliceToString(uts.Release[:])
}
