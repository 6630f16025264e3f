package device

import (
	"errors"
	"fmt"
)

// Multi is one multi-queue TUN device (IFF_MULTI_QUEUE) opened as several
// queues, each a Device of its own: a reader per queue takes in what the
// kernel hands that queue, on its own CPU. The kernel picks a flow's queue
// (tun_automq_select_queue) by the queue that last wrote a packet of that
// flow, or by the flow's hash before any did; so a writer sends each packet
// back through the queue it was read from, and each flow stays on one
// queue, in order.
//
// As a Device, Multi reads and writes through its first queue; forwarders
// that know it use Queues.
type Multi struct {
	queues []Device
}

// NewMulti joins the queues of one TUN (at least one, all of one name).
func NewMulti(queues []Device) (*Multi, error) {
	if len(queues) == 0 {
		return nil, errors.New("multi-queue device: no queue")
	}
	for _, q := range queues[1:] {
		if q.Name() != queues[0].Name() {
			return nil, fmt.Errorf("multi-queue device: queues of %s and %s", queues[0].Name(), q.Name())
		}
	}
	return &Multi{queues: queues}, nil
}

// Queues returns the device's queues, one Device each.
func (m *Multi) Queues() []Device { return m.queues }

func (m *Multi) Name() string   { return m.queues[0].Name() }
func (m *Multi) MTU() int       { return m.queues[0].MTU() }
func (m *Multi) BatchSize() int { return m.queues[0].BatchSize() }

func (m *Multi) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	return m.queues[0].Read(bufs, sizes, offset)
}

func (m *Multi) Write(bufs [][]byte, offset int) (int, error) {
	return m.queues[0].Write(bufs, offset)
}

// Close closes every queue; the device goes when its last queue does.
func (m *Multi) Close() error {
	var errs []error
	for _, q := range m.queues {
		if err := q.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Queued is a device made of queues (Multi); a plain Device has one.
type Queued interface {
	Queues() []Device
}

// QueuesOf returns d's queues: its own for a Multi, d alone otherwise.
func QueuesOf(d Device) []Device {
	if q, ok := d.(Queued); ok {
		return q.Queues()
	}
	return []Device{d}
}
