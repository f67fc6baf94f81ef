package batchlog

// A full disk. A segment write that fails with ENOSPC (or EDQUOT) does not stop the node, as
// other write errors do (Options.OnFatal): appends are answered KAFKA_STORAGE_ERROR, which
// Kafka producers retry, reads go on, and writes resume once space is freed. The same happens
// before the disk is full, when the free space falls below Options.MinFreeBytes: Pebble cannot
// survive a full disk (a failed WAL write stops it), so the reserve keeps it from meeting one.
//
//   - suspend: the committer (a buffered write) or the completer (a direct write) sets
//     Log.suspended. The completer then answers every group it has not seen durable with
//     KAFKA_STORAGE_ERROR and writes nothing more (DropUnwritten); the committer answers new
//     requests the same way, without building groups.
//   - resume: at most once per noSpaceRetry, the committer tries again. It waits for the
//     completer to answer every group before (a barrier through the pending queue), then
//     rebuilds its state as start-up does: next offsets, producer windows and relocated keys
//     from Pebble (which holds the metadata of durable groups only: a group's Pebble batch is
//     applied after its sync), then replay of the segments from the checkpoint, which syncs
//     them, indexes what was written whole (durable from then on: a retry of it is a
//     duplicate) and cuts what was not. Then writes go on; if the disk is still full, the next
//     write suspends them again.
//
// Only a failed segment write (or creation) can mean a full disk (segments.IsNoSpace). A
// failed fdatasync is not one, whatever its errno: after one the kernel may have dropped the
// dirty pages, so what is on disk is unknown; it stops the node, and the restart recovers
// what was durable. Pebble's own errors stop it too.

import (
	"fmt"
	"time"

	"inlet/batchlog/segments"
)

// defaultNoSpaceRetry is how long writes stay suspended after a full disk before the next
// append tries again.
const defaultNoSpaceRetry = time.Second

// isNoSpace reports whether err is a segment write that found the disk full
// (segments.IsNoSpace).
func (l *Log) isNoSpace(err error) bool { return l.segs != nil && segments.IsNoSpace(err) }

// freeCheckEvery is how often the committer reads the free space (Options.MinFreeBytes).
const freeCheckEvery = 100 * time.Millisecond

// lowOnSpace reports whether the segments' file system has less free space than
// Options.MinFreeBytes, and how much it has.
func (l *Log) lowOnSpace() (bool, int64) {
	if l.opts.MinFreeBytes <= 0 || l.segs == nil {
		return false, 0
	}
	free, err := l.segs.FreeBytes()
	return err == nil && free < l.opts.MinFreeBytes, free
}

// checkFreeSpace runs on the committer before each group, reading the free space at most every
// freeCheckEvery: below the reserve, writes are suspended before the disk is full.
func (l *Log) checkFreeSpace() {
	if l.opts.MinFreeBytes <= 0 || l.suspended.Load() || time.Since(l.lastFreeCheck) < freeCheckEvery {
		return
	}
	l.lastFreeCheck = time.Now()
	if low, free := l.lowOnSpace(); low {
		l.suspend(fmt.Errorf("%d bytes free on the disk, below the reserve of %d (--min-free-bytes)", free, l.opts.MinFreeBytes))
	}
}

// suspend stops writes after a full disk (see the top of the file).
func (l *Log) suspend(err error) {
	l.suspendedAt.Store(time.Now().UnixNano())
	if l.suspended.CompareAndSwap(false, true) {
		l.log.Error("batchlog: the disk is full; appends are answered KAFKA_STORAGE_ERROR until space is freed", "err", err)
	}
}

// resume runs on the committer while writes are suspended: it reports whether they may go
// on. An upkeep pass holding retainMu (it may be waiting on the committer) defers it.
func (l *Log) resume() bool {
	retry := l.noSpaceRetry
	if retry == 0 {
		retry = defaultNoSpaceRetry
	}
	if time.Since(time.Unix(0, l.suspendedAt.Load())) < retry {
		return false
	}
	if low, _ := l.lowOnSpace(); low {
		l.suspendedAt.Store(time.Now().UnixNano())
		return false
	}
	if !l.retainMu.TryLock() {
		return false
	}
	defer l.retainMu.Unlock()
	barrier := make(chan struct{})
	l.pending <- &pendingGroup{barrier: barrier}
	<-barrier
	if err := l.rebuild(); err != nil {
		if l.isNoSpace(err) {
			l.suspend(err)
		} else {
			l.fail(fmt.Errorf("rebuild after a full disk: %w", err))
		}
		return false
	}
	l.suspended.Store(false)
	l.log.Info("batchlog: writes resumed after a full disk")
	return true
}

// rebuild resets the committer's state to what is durable (see the top of the file). The
// completer is idle and retention excluded (retainMu).
func (l *Log) rebuild() error {
	ss := l.segs
	if err := ss.ResetAfterFailure(); err != nil {
		return err
	}
	byID := map[uint32]*Partition{}
	l.topicsMu.RLock()
	for _, t := range l.topics {
		for _, p := range t.Partitions {
			byID[p.ID] = p
		}
	}
	l.topicsMu.RUnlock()
	if err := l.loadLogState(byID, false); err != nil {
		return err
	}
	if err := l.replaySegments(ss, byID); err != nil {
		return err
	}
	if err := l.loadTxnState(byID); err != nil {
		return err
	}
	l.orderWindows()
	return nil
}
