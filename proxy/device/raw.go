package device

// VnetHdrLen is the length of the virtio-net header in front of every
// frame a TUN with IFF_VNET_HDR reads and writes (struct
// virtio_net_hdr).
const VnetHdrLen = 10

// MaxFrame is the room one raw frame needs: the header and the largest
// packet a GSO super-packet can be.
const MaxFrame = VnetHdrLen + 65535

// Raw is a queue that can pass frames whole: the virtio-net header the
// kernel wrote and the packet behind it, a GSO super-packet left as one.
// Writing such a frame back hands the kernel the same skb shape it gave
// (its segmentation and checksum still to do), which is what an empty
// spec needs: nothing to impair per segment, so nothing to split.
//
// ReadRaw and WriteRaw go through the runtime's poller like Read and
// Write; Interrupt makes a ReadRaw that waits (or the next one) return
// os.ErrDeadlineExceeded, and Resume clears that, for a reader that must
// stop passing frames whole. ReadRaw is called by one goroutine at a
// time, and so is WriteRaw (the offload backend keeps the call's frame in
// the queue: no allocation per frame).
type Raw interface {
	ReadRaw(frame []byte) (int, error)
	WriteRaw(frame []byte) error
	Interrupt()
	Resume()
}
