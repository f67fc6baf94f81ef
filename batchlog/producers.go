package batchlog

import (
	"cmp"
	"time"

	"inlet/batchlog/windows"
	"inlet/idem"
	"inlet/wire"
)

// Producer windows held: Options.MaxProducerWindows bounds how many the node holds,
// Options.MaxProducerWindowsPerPrincipal how many the appends of one principal
// (Request.Principal) made. The lists, the eviction of idle windows at a bound and the cap
// applied as windows load are package windows (the policy is explained there); here the
// committer keeps the map of windows by key, deletes the keys of dropped ones from Pebble
// with the next group carrying metadata (addMetadata, s.expired), and counts for Stats.

// DefaultMaxProducerWindows is Options.MaxProducerWindows's default: 100,000 windows, about
// 30 MiB (Redpanda's max_concurrent_producer_ids default, there per core).
const DefaultMaxProducerWindows = 100000

// DefaultProducerIdleEviction is Options.ProducerIdleEviction's default: two minutes, above
// the Java producer's delivery.timeout.ms of 120 s and kgo's record timeout (package windows).
const DefaultProducerIdleEviction = 2 * time.Minute

// window is a producer's state on one partition with its places on the lists.
type window = windows.Window[producerKey]

// windowLists is the committer's lists of windows.
type windowLists = windows.Lists[producerKey]

func (k producerKey) compare(o producerKey) int {
	return cmp.Or(cmp.Compare(k.id, o.id), cmp.Compare(k.partition, o.partition))
}

// newWindow makes the window of key for a first batch, linked as the most recent one.
func (l *Log) newWindow(key producerKey, owner string) *window {
	w := &window{State: idem.NewState(), Key: key}
	l.producers[key] = w
	l.windows.PushFront(w, owner)
	l.windowsHeld.Store(int64(l.windows.Len()))
	return w
}

// dropWindow forgets the window of k (expiry, eviction, a deleted partition): its key is
// deleted with the next group that carries metadata.
func (l *Log) dropWindow(k producerKey) {
	s := &l.scratch
	if w := l.producers[k]; w != nil {
		l.windows.Remove(w)
		delete(l.producers, k)
	}
	delete(s.touched, k)
	s.expired = append(s.expired, k)
	l.windowsHeld.Store(int64(l.windows.Len()))
}

// admitWindow decides whether owner's batch may start a new window at nowMs, evicting an idle
// window to make room at a bound that is reached: wire.ErrNone, or the code to refuse the
// batch with.
func (l *Log) admitWindow(owner string, nowMs int64) int16 {
	b := windows.Bounds{Max: l.opts.MaxProducerWindows, PerOwner: l.opts.MaxProducerWindowsPerPrincipal, Idle: l.opts.ProducerIdleEviction}
	if !l.windows.Admit(b, owner, nowMs, l.evictWindow) {
		l.windowsRefused.Add(1)
		return wire.ErrThrottlingQuotaExceeded
	}
	return wire.ErrNone
}

func (l *Log) evictWindow(w *window) {
	l.dropWindow(w.Key)
	l.windowsEvicted.Add(1)
}

// orderWindows links the windows loaded at start-up (or by a rebuild after a full disk) by
// their last write, and applies MaxProducerWindows to them: the least recently written beyond
// it are dropped (open transactions are kept), as eviction would have before the restart. A
// window loaded without its last write time (kept before version 2 of its encoding) counts
// from now.
func (l *Log) orderWindows() {
	now := time.Now().UnixMilli()
	ws := make([]*window, 0, len(l.producers))
	for _, w := range l.producers {
		if w.LastWrite == 0 {
			w.LastWrite = now
		}
		ws = append(ws, w)
	}
	dropped := l.windows.Load(ws, l.opts.MaxProducerWindows, producerKey.compare)
	for _, w := range dropped {
		delete(l.producers, w.Key)
		delete(l.scratch.touched, w.Key)
		l.scratch.expired = append(l.scratch.expired, w.Key)
	}
	if len(dropped) > 0 {
		l.windowsEvicted.Add(uint64(len(dropped)))
		l.log.Info("batchlog: producer windows beyond the bound dropped at load", "dropped", len(dropped), "bound", l.opts.MaxProducerWindows)
	}
	l.windowsHeld.Store(int64(l.windows.Len()))
}

// ProducerWindowStats is what Stats reports of the producer windows.
type ProducerWindowStats struct {
	Held    int64  // windows held now
	Evicted uint64 // idle windows evicted to make room since Open (load included)
	Refused uint64 // batches refused because every evictable window was live
}
