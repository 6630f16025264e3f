// Package engine is wanlab's impairment engine: per-direction pipelines of
// netem and tbf stages that decide, for every packet stamped on arrival,
// whether it is dropped, marked, corrupted, duplicated or reordered and at
// which nanosecond it leaves. It runs on an injected clock with one seeded
// PRNG per stage, so a virtual-clock run reproduces bit for bit.
//
// # Model
//
// A Pipeline mirrors a Linux qdisc chain: "netem ... | tbf ..." is a netem
// root whose child is tbf, exactly as `tc qdisc add ... root handle 1:
// netem ...; tc qdisc add ... parent 1:1 tbf ...`. Internally the pipeline
// is a discrete-event simulation: every stage exposes the time its head
// packet leaves it, and the pipeline moves packets between stages at those
// times (not at the time somebody happens to call it), so a late release
// loop never changes a departure time. This equals the kernel with a
// perfect qdisc watchdog and an infinitely fast device.
//
// One exception, on a real clock only (Options.RealClock: the proxy, whose
// callers' times are the real times packets are read and written): the
// kernel's tbf reads the clock when it is dequeued and caps its tokens at
// the bucket, so after a late dequeue it sends at most a bucket's worth at
// once. A tbf stage does the same: when a dequeue comes so late that the
// capped bucket is more than a packet short of what its schedule sent, the
// packets still in that stage get the departures the kernel's tbf gives
// them from that instant (later, never earlier); every other departure,
// and every departure of Simulate, stays as computed.
//
// # Time
//
// The engine never reads a clock: Enqueue, Dequeue and Swap carry the time
// they happen at (ns on the caller's clock, release.MonotonicNow in the
// proxy, a plain counter in Simulate and the tests), and packets carry
// their arrival stamp.
//
// # Where it differs from Linux, and why
//
//   - Lengths are IP lengths: a TUN device has no link-layer header, so
//     netem's rate and tbf's buckets count 14 bytes less per packet than
//     on an Ethernet qdisc (use netem's PACKETOVERHEAD to add them).
//   - Randomness is a PCG per stage, seeded; the kernel's prandom and its
//     unseeded get_random_u32 (corruption offset, uniform slots) are not
//     reproducible, so bit-exact agreement with a kernel run is impossible
//     by construction. The algorithms using the numbers are the kernel's.
//   - Delay correlation uses a Gaussian copula instead of get_crandom plus
//     a modulo, which in Linux leaves almost no correlation (see
//     delayCorrelation). Loss, duplicate, corrupt and reorder correlation
//     are the kernel's get_crandom, including its known effect of lowering
//     the realised probability; realized.go computes the realised value
//     (CorrelatedProbability) so that callers can warn about it.
//   - A netem duplicate is never duplicated again by a second netem in the
//     chain (the kernel's root re-enqueue could loop; Linux 6.17+ refuses
//     such trees outright).
//   - ECN marks are counted as ECNMarked, not as drops as the kernel's
//     qstats do.
//   - Jitter is 64-bit (the kernel's tabledist takes it as s32, wrapping
//     above 2.147 s).
//
// # Goroutines
//
// One goroutine (the reader) calls Enqueue/EnqueueBatch; another (the
// release loop) calls NextDeparture and Dequeue; anyone may call Snapshot
// and Swap. One mutex per Pipeline guards all state; each call holds it for
// a bounded amount of work (the packets that become due), never while
// blocking.
//
// # Buffers
//
// Packets come from a Pool. Enqueue takes ownership of the packet: from then
// on the pipeline either returns it from Dequeue (ownership passes to the
// caller, who sends it and calls Pool.Put) or drops it (the pipeline calls
// the OnDrop hook, if any, then puts it back itself). Duplicates are new
// packets from the same pool, returned by Dequeue like any other.
package engine
