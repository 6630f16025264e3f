//go:build !linux

package device

// RawOf returns nil: no device here passes frames whole.
func RawOf(d Device) Raw { return nil }
