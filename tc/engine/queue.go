package engine

// timeHeap is netem's tfifo: packets ordered by departure time, ties in
// arrival order (the kernel's rbtree puts equal times to the right, i.e.
// after those already queued). A binary heap on a preallocated slice:
// pushing and popping never allocate once the slice reached the limit.
type timeHeap []*Packet

func (h timeHeap) less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].order < h[j].order
}

func (h *timeHeap) push(p *Packet) {
	*h = append(*h, p)
	s := *h
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *timeHeap) pop() *Packet {
	s := *h
	n := len(s) - 1
	top := s[0]
	s[0] = s[n]
	s[n] = nil
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// fifo is a growable ring of packets (tbf's queue, the pipeline's output).
// It grows by doubling and never shrinks, so steady state allocates
// nothing.
type fifo struct {
	buf        []*Packet
	head, size int
}

func (q *fifo) len() int { return q.size }

func (q *fifo) push(p *Packet) {
	if q.size == len(q.buf) {
		n := 2 * len(q.buf)
		if n == 0 {
			n = 64
		}
		nb := make([]*Packet, n)
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = p
	q.size++
}

func (q *fifo) peek() *Packet { return q.buf[q.head] }

// at returns the i-th packet from the head.
func (q *fifo) at(i int) *Packet { return q.buf[(q.head+i)%len(q.buf)] }

func (q *fifo) tail() *Packet { return q.buf[(q.head+q.size-1)%len(q.buf)] }

func (q *fifo) pop() *Packet {
	p := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
	}
	q.size--
	return p
}
