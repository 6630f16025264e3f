//go:build !linux

package device

// Pending says whether a Read of d would return packets at once; false
// where the platform's devices cannot tell.
func Pending(d Device) bool { return false }
