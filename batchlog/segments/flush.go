package segments

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The flusher: one goroutine of the store writes the groups the committer stages and makes
// them durable, apart from the completer that answers them.
//
//	committer (Apply)          flusher                          completer (Wait, in order)
//	stage group N ──kick──▶    take every staged group          wait until N is flushed
//	                           pwritev them (per segment)       commit N's index to Pebble
//	                           fdatasync each segment once      publish, wake, answer N
//	                           hand the buffers to the tail cache
//	                           flushed = the last one's seq ──▶
//
// Why apart: the completer, once a group is durable, commits its index to Pebble, publishes
// high watermarks, wakes the long polls and answers every request of the group (each produce
// reply encoded and queued). While it also wrote and synced, a request that arrived during a
// sync waited for that sync, then for the completer's answers to the groups it covered, and
// only then for its own write and sync. Now the flusher starts the next write as soon as a
// sync returns, while the completer answers beside it: a request waits for the sync in
// progress, then its own write and sync. (Measured: BENCHMARKS.md, "The group commit's own
// goroutine".)
//
// Order: the one flusher writes groups in apply order, all of a segment's groups written and
// synced before anything of the next segment is written, so only the last segment can hold a
// torn write (Replay). The completer waits for each group in apply order, so nothing is
// indexed, published or acknowledged before every group before it is durable, as before.
//
// A failed write or sync: the flusher writes nothing more (every group it takes after it is
// answered with that error) until ResetAfterFailure, the rebuild after a full disk; the
// completer stops the node on a failed sync and suspends writes on a full disk (the log's
// nospace.go), dropping the groups the flusher has not taken (DropUnwritten).
//
// Ownership: a staged group belongs to the flusher from the moment it takes it until its
// progress passes the group's seq; the completer releases a group only after that (settle),
// so a buffer is never recycled while it is being written.
type flusher struct {
	once    sync.Once
	kick    chan struct{} // one slot: a group was staged
	done    chan struct{} // one slot: flushed moved (only the completer receives)
	stopped chan struct{} // closed by stop
	exited  chan struct{} // closed as the goroutine returns
	closed  atomic.Bool

	// next is the seq of the last group staged (under Store.stagedMu); flushed is the seq up
	// to which every group taken has its answer (Group.err, written before flushed moves).
	next    uint64
	flushed atomic.Uint64
	// failed is the first failed write or sync since the last reset (under Store.stagedMu).
	failed error

	taking  []*Group // flusher-owned scratch
	iov     [][]byte
	evicted [][]byte
}

// errDropped answers the wait for a group DropUnwritten took off the staged list.
var errDropped = errors.New("batchlog: group dropped unwritten (writes are suspended)")

// stage hands g, staged into its buffer, to the flusher (the committer, from Apply).
func (s *Store) stage(g *Group) {
	f := &s.flusher
	f.once.Do(func() {
		f.kick, f.done = make(chan struct{}, 1), make(chan struct{}, 1)
		f.stopped, f.exited = make(chan struct{}), make(chan struct{})
		go s.flushLoop()
	})
	s.stagedMu.Lock()
	f.next++
	g.seq = f.next
	s.staged = append(s.staged, g)
	s.stagedMu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default: // a kick is pending: the flusher takes every group staged when it wakes
	}
}

// stop ends the flusher (Store.Close, once the completer has returned).
func (f *flusher) stop() {
	f.once.Do(func() {}) // none starts after this
	if f.stopped != nil && f.closed.CompareAndSwap(false, true) {
		close(f.stopped)
		<-f.exited
	}
}

func (s *Store) flushLoop() {
	f := &s.flusher
	defer close(f.exited)
	for {
		select {
		case <-f.kick:
		case <-f.stopped:
			return
		}
		for s.flushStaged() {
		}
	}
}

// flushStaged takes every staged group, writes them in apply order (one pwritev per segment)
// and syncs each segment once: under light load many small groups share one fdatasync. It
// reports whether there was any group to take.
func (s *Store) flushStaged() bool {
	f := &s.flusher
	s.stagedMu.Lock()
	batch := append(f.taking[:0], s.staged...)
	clear(s.staged)
	s.staged = s.staged[:0]
	for _, g := range batch {
		g.taken = true
	}
	err := f.failed
	s.stagedMu.Unlock()
	f.taking = batch
	if len(batch) == 0 {
		return false
	}
	i := 0
	for err == nil && i < len(batch) {
		// The groups of one segment are adjacent in the file: write them with one pwritev
		// (a direct write's CPU cost is mostly per call), then sync the segment.
		j := i + 1
		for j < len(batch) && batch[j].seg == batch[i].seg {
			j++
		}
		if err = s.writeStaged(batch[i:j]); err == nil {
			err = s.fdatasync(batch[i].seg)
		}
		if err == nil {
			s.cacheSynced(batch[i:j])
			i = j
		}
	}
	if err != nil {
		for _, g := range batch[i:] {
			g.err = err
		}
		s.stagedMu.Lock()
		if f.failed == nil {
			f.failed = err
		}
		s.stagedMu.Unlock()
	}
	f.flushed.Store(batch[len(batch)-1].seq)
	clear(batch)
	select {
	case f.done <- struct{}{}:
	default:
	}
	return true
}

// cacheSynced hands the buffers of synced groups to the tail cache, in write order (the
// cache keeps its entries sorted by position); the buffers it pushes out go back to the
// staging pool.
func (s *Store) cacheSynced(groups []*Group) {
	if s.tail == nil {
		return
	}
	f := &s.flusher
	for _, g := range groups {
		// The cache takes the buffer over: Release will not recycle it.
		f.evicted = s.tail.add(g.seg.id, g.start, g.stage, f.evicted[:0])
		g.stage = nil
		for _, b := range f.evicted {
			select {
			case s.stages <- b[:cap(b)]:
			default:
			}
		}
		clear(f.evicted)
	}
}

// fdatasync makes seg's written data durable, timed for the observer.
func (s *Store) fdatasync(seg *segment) error {
	var began time.Time
	if s.obs != nil {
		began = time.Now()
	}
	if err := seg.f.Datasync(); err != nil {
		return fmt.Errorf("batchlog: sync segment %d: %w", seg.id, &syncFailed{err})
	}
	if s.obs != nil {
		s.obs.Synced(time.Since(began))
	}
	return nil
}

// writeStaged writes staged groups of one segment, adjacent in the file and in order: with
// the segment's O_DIRECT writer, which it closes after the segment's last group, or through
// the page cache where there is none.
func (s *Store) writeStaged(groups []*Group) error {
	seg := groups[0].seg
	w := seg.f
	if d := seg.direct.Load(); d != nil {
		w = d.f
	} else if seg.usesDirect {
		panic("BUG: batchlog: direct writer closed before the segment's last group was written")
	}
	f := &s.flusher
	iov := f.iov[:0]
	end := groups[0].start
	for _, g := range groups {
		if g.start != end {
			panic("BUG: batchlog: staged groups of a segment are not adjacent")
		}
		iov = append(iov, g.stage)
		end += int64(len(g.stage))
	}
	f.iov = iov
	// A short direct write ends on a block boundary (O_DIRECT transfers whole blocks), so it
	// continues at an aligned address inside the next stage.
	_, err := w.WriteV(iov, groups[0].start)
	clear(f.iov)
	if err != nil {
		return fmt.Errorf("batchlog: write segment %d: %w", seg.id, &writeFailed{err})
	}
	seg.directEnd.Store(end)
	if end == seg.final.Load() {
		seg.closeWriter()
	}
	return nil
}

// Wait returns once the group is durable (the flusher has written and synced it, and every
// group before it), having applied its index and metadata to Pebble, unsynced: the segment is
// the log; Pebble is rebuilt from it. The completer calls it, in apply order.
func (g *Group) Wait() error {
	if g.empty {
		// Every group before it is durable (the completer waits in order), and it adds
		// nothing, so its checkpoint (its start) is durable too.
		return g.commitIndex()
	}
	if err := g.s.waitFlushed(g); err != nil {
		return err
	}
	return g.commitIndex()
}

// waitFlushed waits for the flusher's answer for g (the completer's; it alone receives on
// flusher.done, and it alone drops groups, so a group it waits for cannot be dropped meanwhile).
func (s *Store) waitFlushed(g *Group) error {
	f := &s.flusher
	s.stagedMu.Lock()
	dropped := g.unwritten
	s.stagedMu.Unlock()
	if dropped {
		return errDropped
	}
	for f.flushed.Load() < g.seq {
		<-f.done
	}
	return g.err
}

// settle waits, before g is released, until the flusher is done with it, if it took it; a
// group it never takes must have been dropped (the completer releases a group only after
// waiting for it or after DropUnwritten).
func (s *Store) settle(g *Group) {
	if g.seq == 0 {
		return
	}
	s.stagedMu.Lock()
	taken, dropped := g.taken, g.unwritten
	s.stagedMu.Unlock()
	switch {
	case taken:
		for s.flusher.flushed.Load() < g.seq {
			<-s.flusher.done
		}
	case !dropped:
		panic("BUG: batchlog: a staged group released before the flusher took it or it was dropped")
	}
}
