package engine

import "github.com/wanlab/wanlab/tc/spec"

// fifoQdisc is sch_fifo.c: pfifo_enqueue tail-drops when the queue holds
// limit packets, bfifo_enqueue when backlog + len would exceed limit
// bytes. Dequeue is qdisc_dequeue_head. A zero limit of both kinds is
// unlimited (the trace stage's default child, mahimahi's unbounded
// droptail).
type fifoQdisc struct {
	q          pktList
	limitPkts  int
	limitBytes int64
}

func (f *fifoQdisc) Enqueue(p *Packet, now int64, env QdiscEnv) {
	if f.limitPkts > 0 && f.q.n >= f.limitPkts ||
		f.limitBytes > 0 && f.q.bytes+int64(len(p.Data)) > f.limitBytes {
		env.Drop(p, DropQueue)
		return
	}
	p.enq = now
	f.q.push(p)
}

func (f *fifoQdisc) Peek(int64, QdiscEnv) *Packet    { return f.q.head }
func (f *fifoQdisc) Dequeue(int64, QdiscEnv) *Packet { return f.q.pop() }
func (f *fifoQdisc) Len() int                        { return f.q.n }
func (f *fifoQdisc) Backlog() int64                  { return f.q.bytes }

// newFIFO is a tail-drop FIFO of at most pkts packets and bytes bytes
// (0: no limit of that kind).
func newFIFO(pkts int, bytes int64) *fifoQdisc {
	return &fifoQdisc{limitPkts: pkts, limitBytes: bytes}
}

func init() {
	registerQdisc("pfifo", func(st spec.Stage, _ uint64, _ int64) Qdisc {
		return newFIFO(int(st.(*spec.PFIFO).PacketLimit()), 0)
	})
	registerQdisc("bfifo", func(st spec.Stage, _ uint64, _ int64) Qdisc {
		return newFIFO(0, int64(st.(*spec.BFIFO).ByteLimit()))
	})
}
