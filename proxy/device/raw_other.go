//go:build !linux

package device

// VnetHdrLen is the length of the virtio-net header of a raw frame.
const VnetHdrLen = 10

// MaxFrame is the room one raw frame needs.
const MaxFrame = VnetHdrLen + 65535

// Raw is a queue that can pass frames whole (Linux only).
type Raw interface {
	ReadRaw(frame []byte) (int, error)
	WriteRaw(frame []byte) error
	Interrupt()
	Resume()
}

// RawOf returns nil: no device here passes frames whole.
func RawOf(d Device) Raw { return nil }
