package analyzer

import (
	"errors"
	"fmt"
	"io"

	"github.com/wanlab/wanlab/analyzer/decode"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
)

// Reading a capture is split in two stages that run on two cores: a
// reader goroutine reads and decodes frames into batches (and takes
// each packet's duplicate fingerprint), and the caller's goroutine
// analyzes them in file order. Batches cycle between the stages through
// two channels, so the memory is a fixed handful of batches however long
// the capture.

// frameBatchLen is the number of frames per batch. A hand-over can wake
// the other stage's goroutine from sleep, which costs tens of
// microseconds in a virtual machine; at 256 frames a batch that was a
// third of a bulk capture's time, at 4096 it is noise. (A batch is
// about 750 KB.)
const frameBatchLen = 4096

// frameBatches is how many batches are in flight between the stages, and
// freeGroup how many the analysis hands back to the reader at once.
const (
	frameBatches = 8
	freeGroup    = 4
)

// decodedFrame is one frame after the reader stage.
type decodedFrame struct {
	err    error // decode's verdict: nil for a TCP packet
	ns     int64 // capture time
	iface  int
	nIface int    // interfaces the file had described when the frame was read
	offset int64  // bytes of the file read after the frame
	fp     uint64 // dupFingerprint
}

// frameBatch carries decoded frames from the reader to the analysis; err
// is the reader's error after the last frame (io.EOF at the clean end).
type frameBatch struct {
	n      int
	frames [frameBatchLen]decodedFrame
	pkts   [frameBatchLen]decode.Packet
	err    error
}

// readFrames is the reader stage: it fills free batches from r until the
// file ends or fails, sends each on full, and closes full after the last.
func readFrames(r *pcapfile.Reader, cfg *decode.Config, free <-chan *frameBatch, full chan<- *frameBatch, stop <-chan struct{}) {
	defer close(full)
	for {
		var b *frameBatch
		select {
		case b = <-free:
		case <-stop:
			return
		}
		b.n, b.err = 0, nil
		_, b.err = r.Frames(frameBatchLen, func(f *pcapfile.Frame) {
			df := &b.frames[b.n]
			df.fp, df.err = decodeFrame(cfg, f.Link, f.Data, f.WireLen, &b.pkts[b.n])
			df.ns, df.iface, df.nIface, df.offset = f.Timestamp.UnixNano(), f.Interface, r.Interfaces(), r.Offset()
			b.n++
		})
		select {
		case full <- b:
		case <-stop:
			return
		}
		if b.err != nil {
			return
		}
	}
}

// AnalyzeReader analyzes every frame of r.
func AnalyzeReader(r *pcapfile.Reader, opts Options) (*Result, error) {
	a := New(opts)
	free := make(chan *frameBatch, frameBatches)
	for range frameBatches {
		free <- new(frameBatch)
	}
	full := make(chan *frameBatch, frameBatches)
	stop := make(chan struct{})
	defer close(stop)
	go readFrames(r, opts.Decode, free, full, stop)
	// Analyzed batches go back to the reader in groups: the reader, the
	// faster stage, waits for a free batch most of the time, and the
	// first send after it parked has to wake it, a system call on this
	// (the slower) goroutine. Each group costs one wake-up. The group
	// goes back before this goroutine waits for a batch itself, so the
	// reader never waits for batches held here.
	var done []*frameBatch
	giveBack := func() {
		for _, b := range done {
			free <- b
		}
		done = done[:0]
	}
	for {
		var b *frameBatch
		var ok bool
		select {
		case b, ok = <-full:
		default:
			giveBack()
			b, ok = <-full
		}
		if !ok {
			break
		}
		for i := range b.n {
			df := &b.frames[i]
			a.ExpectInterfaces(df.nIface)
			a.addDecoded(df.iface, df.err, &b.pkts[i], df.ns, df.fp)
			if a.opts.Progress != nil && a.res.Frames&0xFFFF == 0 {
				a.opts.Progress(df.offset)
			}
		}
		err := b.err
		if err == nil {
			if done = append(done, b); len(done) == freeGroup {
				giveBack()
			}
			continue
		}
		switch {
		case err == io.EOF:
		case errors.Is(err, pcapfile.ErrTruncated):
			a.res.Warnings = append(a.res.Warnings, err.Error())
			a.res.ReadStopped = err.Error()
		case a.res.Frames == 0:
			a.Finish()
			return nil, err
		default:
			a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("stopped early: %v", err))
			a.res.ReadStopped = err.Error()
		}
		break
	}
	a.recordWarnings(r)
	return a.Finish(), nil
}

// recordWarnings reports the reader's broken records in the Result (the
// reader stage has stopped: it no longer touches r).
func (a *Analyzer) recordWarnings(r *pcapfile.Reader) {
	ws := r.RecordWarnings()
	if len(ws) == 0 {
		return
	}
	a.res.BadRecords = append(a.res.BadRecords, ws...)
	for _, w := range ws {
		next := fmt.Sprintf("skipped to the next record found, at offset %d", w.Resumed)
		switch {
		case w.Resumed < 0:
			next = "no next record found, stopped"
			a.res.ReadStopped = fmt.Sprintf("broken record at offset %d (frame %d): %s; no next record found", w.Offset, w.Frame, w.Problem)
		case w.Resumed == w.Offset:
			next = "read as tshark reads it"
		}
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("broken record at offset %d (frame %d): %s; %s; %d frames read in all", w.Offset, w.Frame, w.Problem, next, a.res.Frames))
	}
	if n := r.BrokenRecords(); n > len(ws) {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("%d broken records in all (the first %d and the last listed)", n, len(ws)))
	}
}

// finisher is the goroutine of Options.ConcurrentFinish: it diagnoses
// finished connections and hands them to OnFinish, in the order sent.
// The connections it receives are no longer touched by the analysis.
type finisher struct {
	batches chan []*Connection
	done    chan struct{}
}

// finisherQueue is the number of batches (one per sweep) that may wait.
const finisherQueue = 4

func newFinisher(onFinish func(*Connection), wanted func(*Connection) bool, wr WindowRatio) *finisher {
	f := &finisher{batches: make(chan []*Connection, finisherQueue), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for b := range f.batches {
			for _, c := range b {
				diagnoseWanted(c, wanted, wr)
				onFinish(c)
			}
		}
	}()
	return f
}

// send queues a copy of conns (the caller reuses its slice).
func (f *finisher) send(conns []*Connection) {
	f.batches <- append([]*Connection(nil), conns...)
}

// wait returns once every connection sent has been handed over.
func (f *finisher) wait() {
	close(f.batches)
	<-f.done
}
