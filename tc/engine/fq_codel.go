package engine

import (
	"encoding/binary"

	"github.com/wanlab/wanlab/internal/header"
	"github.com/wanlab/wanlab/tc/spec"
)

// fqCodel is sch_fq_codel.c: packets hashed by their 5-tuple into flows
// (fq_codel_hash), each flow a FIFO with its own CoDel state, served by
// deficit round robin over a list of new flows and a list of old ones
// (fq_codel_dequeue), and, when the queue is over its packet or memory
// limit, a batch dropped from the head of the fattest flow
// (fq_codel_drop).
type fqCodel struct {
	flows    []fqFlow
	newFlows flowList
	oldFlows flowList
	n        int   // packets in the flows (sch->q.qlen less the stash)
	backlog  int64 // bytes in the flows (sch->qstats.backlog)
	memory   int64 // memory_usage
	limit    int
	memLimit int64
	quantum  int32
	batch    int
	prm      codelParams
	stats    codelStats
	seed     uint64
	st       stash
	cur      *fqFlow // the flow codel_dequeue is working on
	// Counters fq_codel dumps in its xstats.
	dropOverlimit, dropOvermemory, newFlowCount uint64
}

// fqFlow is struct fq_codel_flow.
type fqFlow struct {
	q       pktList
	deficit int32
	cvars   codelVars
	listed  bool    // on new_flows or old_flows (flowchain not empty)
	next    *fqFlow // flowchain
}

// flowList is a list_head of flows, in order.
type flowList struct{ head, tail *fqFlow }

func (l *flowList) empty() bool { return l.head == nil }

func (l *flowList) addTail(f *fqFlow) {
	f.next = nil
	if l.tail == nil {
		l.head = f
	} else {
		l.tail.next = f
	}
	l.tail = f
	f.listed = true
}

// popHead removes the first flow (list_del_init when it is not added
// elsewhere).
func (l *flowList) popHead() *fqFlow {
	f := l.head
	l.head = f.next
	if l.head == nil {
		l.tail = nil
	}
	f.next = nil
	f.listed = false
	return f
}

func newFQCodel(cfg *spec.FQCoDel, seed uint64) *fqCodel {
	return &fqCodel{
		flows:    make([]fqFlow, cfg.FlowCount()),
		limit:    int(cfg.PacketLimit()),
		memLimit: int64(cfg.MemoryBytes()),
		quantum:  int32(cfg.QuantumBytes()),
		batch:    int(cfg.DropBatchSize()),
		prm:      newCodelParams(int64(cfg.TargetTime()), int64(cfg.IntervalTime()), int64(cfg.CEThreshold), !cfg.NoECN),
		seed:     seed,
	}
}

// flowHash is skb_get_hash for the flow dissector's keys: the addresses,
// the protocol and (for TCP, UDP, SCTP, UDP-Lite) the ports, ordered so
// both directions of a flow hash alike (flow_hash_consistentify), mixed
// with a per-qdisc seed where the kernel uses its boot-time random
// hashrnd. Packets that are not IP hash to 0.
func flowHash(b []byte, seed uint64) uint32 {
	ip, err := header.ParseIP(b)
	if err != nil {
		return 0
	}
	src, dst := ip.Src.As16(), ip.Dst.As16()
	var sp, dp uint16
	if ip.TransportOK && header.HasPorts(ip.Proto) {
		sp, dp, _ = header.Ports(ip.Transport(b))
	}
	if string(dst[:]) < string(src[:]) || src == dst && dp < sp {
		src, dst, sp, dp = dst, src, dp, sp
	}
	h := seed ^ 0x9e3779b97f4a7c15
	mix := func(v uint64) {
		h ^= v
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 31
	}
	for i := 0; i < 16; i += 8 {
		mix(binary.LittleEndian.Uint64(src[i:]))
		mix(binary.LittleEndian.Uint64(dst[i:]))
	}
	mix(uint64(sp)<<24 | uint64(dp)<<8 | uint64(ip.Proto))
	return uint32(h >> 32)
}

// classify is fq_codel_hash: reciprocal_scale(hash, flows_cnt).
func (f *fqCodel) classify(p *Packet) int {
	return int((uint64(flowHash(p.Data, f.seed)) * uint64(len(f.flows))) >> 32)
}

// Enqueue is fq_codel_enqueue.
func (f *fqCodel) Enqueue(p *Packet, now int64, env QdiscEnv) {
	idx := f.classify(p)
	p.enq = now // codel_set_enqueue_time
	flow := &f.flows[idx]
	flow.q.push(p)
	f.n++
	f.backlog += int64(len(p.Data))
	if !flow.listed {
		f.newFlows.addTail(flow)
		f.newFlowCount++
		flow.deficit = f.quantum
	}
	// The kernel charges skb->truesize; a packet here costs its length.
	f.memory += int64(len(p.Data))
	memoryLimited := f.memory > f.memLimit
	if f.Len() <= f.limit && !memoryLimited {
		return
	}
	before := f.n
	f.drop(env)
	dropped := uint64(before - f.n)
	f.dropOverlimit += dropped
	if memoryLimited {
		f.dropOvermemory += dropped
	}
}

// drop is fq_codel_drop: find the fattest flow and drop packets from its
// head until half its backlog is gone or drop_batch packets are.
func (f *fqCodel) drop(env QdiscEnv) {
	var maxBacklog int64
	idx := 0
	for i := range f.flows {
		if b := f.flows[i].q.bytes; b > maxBacklog {
			maxBacklog, idx = b, i
		}
	}
	threshold := maxBacklog >> 1
	flow := &f.flows[idx]
	var n int64
	i := 0
	for {
		p := flow.q.pop()
		if p == nil {
			break
		}
		n += int64(len(p.Data))
		f.memory -= int64(len(p.Data))
		f.n--
		f.backlog -= int64(len(p.Data))
		env.Drop(p, DropQueue)
		i++
		if i >= f.batch || n >= threshold {
			break
		}
	}
	flow.cvars.count += uint32(i)
}

// codelDequeue is fq_codel's dequeue_func: the head of the current flow.
func (f *fqCodel) codelDequeue() *Packet {
	p := f.cur.q.pop()
	if p != nil {
		f.n--
		f.backlog -= int64(len(p.Data))
		f.memory -= int64(len(p.Data))
	}
	return p
}

// codelBacklog is sch->qstats.backlog, which fq_codel hands codel.
func (f *fqCodel) codelBacklog() int64 { return f.backlog }

// dequeue is fq_codel_dequeue.
func (f *fqCodel) dequeue(now int64, env QdiscEnv) *Packet {
	for {
		head := &f.newFlows
		if head.empty() {
			head = &f.oldFlows
			if head.empty() {
				return nil
			}
		}
		flow := head.head
		if flow.deficit <= 0 {
			flow.deficit += f.quantum
			head.popHead()
			f.oldFlows.addTail(flow)
			continue
		}
		f.cur = flow
		p := flow.cvars.dequeue(f, &f.prm, &f.stats, now, env)
		f.cur = nil
		if p == nil {
			// force a pass through old_flows to prevent starvation
			head.popHead()
			if head == &f.newFlows && !f.oldFlows.empty() {
				f.oldFlows.addTail(flow)
			}
			continue
		}
		flow.deficit -= int32(len(p.Data))
		return p
	}
}

// Peek is qdisc_peek_dequeued (fq_codel's ->peek).
func (f *fqCodel) Peek(now int64, env QdiscEnv) *Packet { return f.st.peek(now, env, f.dequeue) }

// Dequeue is fq_codel_dequeue.
func (f *fqCodel) Dequeue(now int64, env QdiscEnv) *Packet { return f.st.take(now, env, f.dequeue) }

func (f *fqCodel) Len() int       { return f.n + f.st.n() }
func (f *fqCodel) Backlog() int64 { return f.backlog + f.st.bytes() }

func init() {
	registerQdisc("fq_codel", func(st spec.Stage, seed uint64, _ int64) Qdisc {
		return newFQCodel(st.(*spec.FQCoDel), seed)
	})
}
