package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The control channel between the host and the agent inside the VM is a
// stream of frames over a virtio-serial port: one type byte, a 4-byte
// big-endian payload length, the payload. Requests are JSON; a command's
// output travels as raw stdout and stderr frames, then one exit frame.
const (
	frameHello    = 'h' // guest: agent is up; JSON Hello
	frameRun      = 'r' // host: run a command; JSON runRequest
	frameStdout   = 'o' // guest: bytes the command wrote to stdout
	frameStderr   = 'e' // guest: bytes the command wrote to stderr
	frameExit     = 'x' // guest: the command ended; JSON runExit
	framePowerOff = 'p' // host: power the VM off
)

// maxFrame bounds a payload so a corrupt length cannot make the reader
// allocate gigabytes.
const maxFrame = 1 << 20

type frame struct {
	typ     byte
	payload []byte
}

// Hello is what the agent reports once it is up.
type Hello struct {
	Release string `json:"release"`
	// Qdiscs are the qdisc kinds the guest kernel has, built in or loaded.
	Qdiscs []string `json:"qdiscs"`
	// Uptime is the guest's /proc/uptime when the agent started, seconds.
	Uptime float64 `json:"uptime"`
	// NetworkError says what of the NICs' setup failed (Boot fails with
	// it); empty when all went well.
	NetworkError string `json:"network_error,omitempty"`
}

type runRequest struct {
	Argv []string `json:"argv"`
}

type runExit struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"` // the command could not be started
}

var errFrameType = errors.New("unknown frame type")

func validFrameType(t byte) bool {
	switch t {
	case frameHello, frameRun, frameStdout, frameStderr, frameExit, framePowerOff:
		return true
	}
	return false
}

// writeFrame writes one frame in a single Write, so frames from one
// writer never interleave.
func writeFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("control frame %q: %d bytes, more than %d", typ, len(payload), maxFrame)
	}
	b := make([]byte, 5+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	copy(b[5:], payload)
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame. A stream that ends between frames returns
// io.EOF; one that ends inside a frame io.ErrUnexpectedEOF.
func readFrame(r io.Reader) (frame, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	if !validFrameType(h[0]) {
		return frame{}, fmt.Errorf("control frame type 0x%02x: %w", h[0], errFrameType)
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxFrame {
		return frame{}, fmt.Errorf("control frame %q: length %d, more than %d", h[0], n, maxFrame)
	}
	f := frame{typ: h[0], payload: make([]byte, n)}
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, fmt.Errorf("control frame %q: %w", h[0], err)
	}
	return f, nil
}
