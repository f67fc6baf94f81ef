package batchlog

import (
	"sort"
	"time"

	"inlet/idem"
	"inlet/wire"
)

// Producer windows held: a bound on the committer's memory however many producer ids clients
// make (Redpanda's max_concurrent_producer_ids; Kafka has none and runs out of heap, the
// reason for KIP-936).
//
// A window is one producer id's idem.State on one partition (Kafka's ProducerStateEntry, kept
// per partition), about 300 bytes in memory with its map entries. Options.MaxProducerWindows
// bounds how many the node holds, Options.MaxProducerWindowsPerPrincipal how many the appends
// of one principal (Request.Principal) made. Every window is on two lists, most recently
// written first: the node's and its principal's. A batch that needs a new window when a bound
// is reached evicts the least recently written window of the node (or of the principal, for
// its bound), as Redpanda does, but only an idle one: no write for Options.ProducerIdleEviction
// (default two minutes, above the Java producer's delivery.timeout.ms of 120 s and kgo's
// record timeout, after which a client no longer retries a batch it sent before) and no open
// transaction. An evicted producer that writes again is a producer the partition has not
// seen: its next batch starts a new window whatever its sequence, exactly as after
// producer.id.expiration.ms (idem.State.Check; Kafka's ProducerAppendInfo), and as the client
// has given up on every earlier batch by then, no retry of an appended batch can be taken twice.
// So exactly-once holds for every producer that writes at least every two minutes. When the
// least recently written windows (the last evictScan of the list) are all live, the batch is
// refused with THROTTLING_QUOTA_EXCEEDED (retriable: the client backs off and retries; its
// window is made once an old one has gone idle) and nothing is stored.
//
// Eviction is expiry brought forward: the window's key is deleted from Pebble with the next
// group carrying metadata (addMetadata, s.expired). A crash before that brings it back; the
// cap is applied again as windows load (orderWindows), dropping the least recently written
// beyond it, so a restart never holds more than the bound.

// DefaultMaxProducerWindows is Options.MaxProducerWindows's default: 100,000 windows, about
// 30 MiB (Redpanda's max_concurrent_producer_ids default, there per core).
const DefaultMaxProducerWindows = 100000

// DefaultProducerIdleEviction is Options.ProducerIdleEviction's default (see above).
const DefaultProducerIdleEviction = 2 * time.Minute

// evictScan is how many windows from the old end of a list an admission looks at for an idle
// one: windows with open transactions are skipped over, a few at most, without a walk.
const evictScan = 8

// window is a producer's state on one partition with its places on the lists.
type window struct {
	idem.State
	key    producerKey
	owner  *windowOwner
	linked bool
	// prev is towards the most recently written end; next towards the least.
	prev, next   *window // the node's list
	oprev, onext *window // the owner's list
}

// windowOwner is one principal's windows; "" for windows loaded at start-up (their principal
// is not stored), which the first write by a principal makes its own.
type windowOwner struct {
	name       string
	n          int
	head, tail *window
}

// windowLists is the committer's lists of windows.
type windowLists struct {
	n          int
	head, tail *window
	owners     map[string]*windowOwner
}

func (wl *windowLists) owner(name string) *windowOwner {
	if wl.owners == nil {
		wl.owners = map[string]*windowOwner{}
	}
	o := wl.owners[name]
	if o == nil {
		o = &windowOwner{name: name}
		wl.owners[name] = o
	}
	return o
}

// pushFront links w at the most recent end of both lists.
func (wl *windowLists) pushFront(w *window, o *windowOwner) {
	w.prev, w.next = nil, wl.head
	if wl.head != nil {
		wl.head.prev = w
	} else {
		wl.tail = w
	}
	wl.head = w
	wl.n++
	w.owner = o
	w.oprev, w.onext = nil, o.head
	if o.head != nil {
		o.head.oprev = w
	} else {
		o.tail = w
	}
	o.head = w
	o.n++
	w.linked = true
}

// unlink takes w off both lists.
func (wl *windowLists) unlink(w *window) {
	if !w.linked {
		return
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		wl.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		wl.tail = w.prev
	}
	wl.n--
	o := w.owner
	if w.oprev != nil {
		w.oprev.onext = w.onext
	} else {
		o.head = w.onext
	}
	if w.onext != nil {
		w.onext.oprev = w.oprev
	} else {
		o.tail = w.oprev
	}
	o.n--
	if o.n == 0 {
		delete(wl.owners, o.name)
	}
	w.prev, w.next, w.oprev, w.onext, w.owner, w.linked = nil, nil, nil, nil, nil, false
}

// touch makes w (linked) the most recently written window, of owner when owner is named.
func (wl *windowLists) touch(w *window, owner string) {
	if owner == "" {
		owner = w.owner.name
	}
	if wl.head == w && w.owner.name == owner && w.owner.head == w {
		return
	}
	wl.unlink(w)
	wl.pushFront(w, wl.owner(owner))
}

// newWindow makes the window of key for a first batch, linked as the most recent one.
func (l *Log) newWindow(key producerKey, owner string) *window {
	w := &window{State: idem.NewState(), key: key}
	l.producers[key] = w
	l.windows.pushFront(w, l.windows.owner(owner))
	l.windowsHeld.Store(int64(l.windows.n))
	return w
}

// dropWindow forgets the window of k (expiry, eviction, a deleted partition): its key is
// deleted with the next group that carries metadata.
func (l *Log) dropWindow(k producerKey) {
	s := &l.scratch
	if w := l.producers[k]; w != nil {
		l.windows.unlink(w)
		delete(l.producers, k)
	}
	delete(s.touched, k)
	s.expired = append(s.expired, k)
	l.windowsHeld.Store(int64(l.windows.n))
}

// admitWindow decides whether owner's batch may start a new window at nowMs, evicting an idle
// window to make room at a bound that is reached: wire.ErrNone, or the code to refuse the
// batch with.
func (l *Log) admitWindow(owner string, nowMs int64) int16 {
	idleBefore := nowMs - l.opts.ProducerIdleEviction.Milliseconds()
	if per := l.opts.MaxProducerWindowsPerPrincipal; per > 0 {
		if o := l.windows.owners[owner]; o != nil && o.n >= per && !l.evictIdle(o.tail, true, idleBefore) {
			l.windowsRefused.Add(1)
			return wire.ErrThrottlingQuotaExceeded
		}
	}
	if max := l.opts.MaxProducerWindows; max > 0 && l.windows.n >= max && !l.evictIdle(l.windows.tail, false, idleBefore) {
		l.windowsRefused.Add(1)
		return wire.ErrThrottlingQuotaExceeded
	}
	return wire.ErrNone
}

// evictIdle drops the first idle window among the evictScan least recently written from
// tail (along the owner's list when byOwner) and reports whether it found one.
func (l *Log) evictIdle(tail *window, byOwner bool, idleBefore int64) bool {
	w := tail
	for i := 0; w != nil && i < evictScan; i++ {
		if w.LastWrite > idleBefore {
			return false // the rest are written more recently still
		}
		if w.TxnFirstOffset < 0 {
			l.dropWindow(w.key)
			l.windowsEvicted.Add(1)
			return true
		}
		if byOwner {
			w = w.oprev
		} else {
			w = w.prev
		}
	}
	return false
}

// orderWindows links the windows loaded at start-up (or by a rebuild after a full disk) by
// their last write, and applies MaxProducerWindows to them: the least recently written beyond
// it are dropped (open transactions are kept), as eviction would have before the restart.
func (l *Log) orderWindows() {
	l.windows = windowLists{}
	ws := make([]*window, 0, len(l.producers))
	for _, w := range l.producers {
		w.linked, w.owner = false, nil
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].LastWrite != ws[j].LastWrite {
			return ws[i].LastWrite < ws[j].LastWrite
		}
		if ws[i].key.id != ws[j].key.id {
			return ws[i].key.id < ws[j].key.id
		}
		return ws[i].key.partition < ws[j].key.partition
	})
	drop := 0
	if max := l.opts.MaxProducerWindows; max > 0 && len(ws) > max {
		drop = len(ws) - max
	}
	o := l.windows.owner("")
	dropped := 0
	for _, w := range ws {
		if dropped < drop && w.TxnFirstOffset < 0 {
			delete(l.producers, w.key)
			delete(l.scratch.touched, w.key)
			l.scratch.expired = append(l.scratch.expired, w.key)
			dropped++
			continue
		}
		l.windows.pushFront(w, o)
	}
	if l.windows.n == 0 {
		l.windows.owners = nil
	}
	if dropped > 0 {
		l.windowsEvicted.Add(uint64(dropped))
		l.log.Info("batchlog: producer windows beyond the bound dropped at load", "dropped", dropped, "bound", l.opts.MaxProducerWindows)
	}
	l.windowsHeld.Store(int64(l.windows.n))
}

// ProducerWindowStats is what Stats reports of the producer windows.
type ProducerWindowStats struct {
	Held    int64  // windows held now
	Evicted uint64 // idle windows evicted to make room since Open (load included)
	Refused uint64 // batches refused because every evictable window was live
}
