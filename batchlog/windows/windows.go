// Package windows bounds the producer windows a node holds: a bound on the committer's memory
// however many producer ids clients make (Redpanda's max_concurrent_producer_ids; Kafka has
// none and runs out of heap, the reason for KIP-936). It is pure bookkeeping (no I/O, no
// locks): the committer owns a Lists and calls it on its own goroutine.
//
// A window is one producer id's idem.State on one partition (Kafka's ProducerStateEntry, kept
// per partition), about 300 bytes in memory with its map entries. Bounds.Max bounds how many
// the node holds, Bounds.PerOwner how many the appends of one principal made. Every window is
// on two lists, most recently written first: the node's and its principal's. A batch that
// needs a new window when a bound is reached evicts the least recently written window of the
// node (or of the principal, for its bound), as Redpanda does, but only an idle one: no write
// for Bounds.Idle (batchlog's default is two minutes, above the Java producer's
// delivery.timeout.ms of 120 s and kgo's record timeout, after which a client no longer
// retries a batch it sent before) and no open transaction. An evicted producer that writes
// again is a producer the partition has not seen: its next batch starts a new window whatever
// its sequence, exactly as after producer.id.expiration.ms (idem.State.Check; Kafka's
// ProducerAppendInfo), and as the client has given up on every earlier batch by then, no retry
// of an appended batch can be taken twice. So exactly-once holds for every producer that
// writes at least every two minutes. When the least recently written windows (the last
// evictScan of the list) are all live, Admit refuses the batch (batchlog answers
// THROTTLING_QUOTA_EXCEEDED, retriable: the client backs off and retries; its window is made
// once an old one has gone idle) and nothing is stored.
//
// Eviction is expiry brought forward: the caller deletes the window's key from Pebble with the
// next group carrying metadata. A crash before that brings it back; the cap is applied again
// as windows load (Lists.Load), dropping the least recently written beyond it, so a restart
// never holds more than the bound.
package windows

import (
	"cmp"
	"slices"
	"time"

	"inlet/idem"
)

// evictScan is how many windows from the old end of a list an admission looks at for an idle
// one: windows with open transactions are skipped over, a few at most, without a walk.
const evictScan = 8

// Window is a producer's state on one partition, keyed by K, with its places on the lists.
type Window[K comparable] struct {
	idem.State
	Key   K
	owner *owner[K] // nil: not on the lists
	// prev is towards the most recently written end; next towards the least.
	prev, next   *Window[K] // the node's list
	oprev, onext *Window[K] // the owner's list
}

// owner is one principal's windows; "" for windows loaded at start-up (their principal is
// not stored), which the first write by a principal makes its own.
type owner[K comparable] struct {
	name       string
	n          int
	head, tail *Window[K]
}

// Bounds are the limits Admit applies.
type Bounds struct {
	Max      int           // windows on the node; 0: no bound
	PerOwner int           // windows of one owner; 0: no bound
	Idle     time.Duration // how long a window must go unwritten before it may be evicted
}

// Lists is the node's windows by last write, and each owner's. The zero value is empty.
type Lists[K comparable] struct {
	n          int
	head, tail *Window[K]
	owners     map[string]*owner[K]
}

// Len is the number of windows on the lists.
func (l *Lists[K]) Len() int { return l.n }

// OwnerLen is the number of windows of owner name.
func (l *Lists[K]) OwnerLen(name string) int {
	if o := l.owners[name]; o != nil {
		return o.n
	}
	return 0
}

func (l *Lists[K]) owner(name string) *owner[K] {
	if l.owners == nil {
		l.owners = map[string]*owner[K]{}
	}
	o := l.owners[name]
	if o == nil {
		o = &owner[K]{name: name}
		l.owners[name] = o
	}
	return o
}

// PushFront links w (not on the lists) as the most recently written window, of owner name.
func (l *Lists[K]) PushFront(w *Window[K], name string) { l.pushFront(w, l.owner(name)) }

func (l *Lists[K]) pushFront(w *Window[K], o *owner[K]) {
	w.prev, w.next = nil, l.head
	if l.head != nil {
		l.head.prev = w
	} else {
		l.tail = w
	}
	l.head = w
	l.n++
	w.owner = o
	w.oprev, w.onext = nil, o.head
	if o.head != nil {
		o.head.oprev = w
	} else {
		o.tail = w
	}
	o.head = w
	o.n++
}

// Remove takes w off both lists; a window not on them is left alone.
func (l *Lists[K]) Remove(w *Window[K]) {
	o := w.owner
	if o == nil {
		return
	}
	l.unlink(w)
	if o.n == 0 {
		delete(l.owners, o.name)
	}
}

// unlink takes w off both lists, leaving its owner in the map even when it held only w.
func (l *Lists[K]) unlink(w *Window[K]) {
	o := w.owner
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	l.n--
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
	w.prev, w.next, w.oprev, w.onext, w.owner = nil, nil, nil, nil, nil
}

// Touch makes w (on the lists) the most recently written window, of owner name when name is
// not "" (else of its owner still).
func (l *Lists[K]) Touch(w *Window[K], name string) {
	if name == "" {
		name = w.owner.name
	}
	o := w.owner
	if l.head == w && o.name == name && o.head == w {
		return
	}
	if o.name == name {
		// Within its owner's lists: the owner stays in the map, so a write (the committer
		// touches a window per idempotent batch) allocates nothing, even for an owner of one.
		l.unlink(w)
		l.pushFront(w, o)
		return
	}
	l.Remove(w)
	l.pushFront(w, l.owner(name))
}

// Admit decides whether owner name's batch may start a new window at nowMs. At a bound that
// is reached it takes an idle window off the lists to make room and hands it to evict (which
// forgets it); it reports false when a bound is reached and none of the evictScan least
// recently written windows there is idle.
func (l *Lists[K]) Admit(b Bounds, name string, nowMs int64, evict func(*Window[K])) bool {
	idleBefore := nowMs - b.Idle.Milliseconds()
	if b.PerOwner > 0 {
		if o := l.owners[name]; o != nil && o.n >= b.PerOwner && !l.evictIdle(o.tail, true, idleBefore, evict) {
			return false
		}
	}
	if b.Max > 0 && l.n >= b.Max && !l.evictIdle(l.tail, false, idleBefore, evict) {
		return false
	}
	return true
}

// evictIdle evicts the first idle window among the evictScan least recently written from
// tail (along the owner's list when byOwner) and reports whether it found one.
func (l *Lists[K]) evictIdle(tail *Window[K], byOwner bool, idleBefore int64, evict func(*Window[K])) bool {
	w := tail
	for i := 0; w != nil && i < evictScan; i++ {
		if w.LastWrite > idleBefore {
			return false // the rest are written more recently still
		}
		if w.TxnFirstOffset < 0 {
			l.Remove(w)
			evict(w)
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

// Load empties the lists and links ws (windows loaded at start-up, or by a rebuild after a
// full disk) by their last write, ties broken by compare on their keys, all of owner "". With
// max > 0 the least recently written beyond max are not linked but returned (open
// transactions are kept), as eviction would have dropped them before the restart.
func (l *Lists[K]) Load(ws []*Window[K], max int, compare func(a, b K) int) (dropped []*Window[K]) {
	*l = Lists[K]{}
	for _, w := range ws {
		w.prev, w.next, w.oprev, w.onext, w.owner = nil, nil, nil, nil, nil
	}
	slices.SortFunc(ws, func(a, b *Window[K]) int {
		return cmp.Or(cmp.Compare(a.LastWrite, b.LastWrite), compare(a.Key, b.Key))
	})
	drop := 0
	if max > 0 && len(ws) > max {
		drop = len(ws) - max
	}
	var o *owner[K]
	for _, w := range ws {
		if len(dropped) < drop && w.TxnFirstOffset < 0 {
			dropped = append(dropped, w)
			continue
		}
		if o == nil {
			o = l.owner("")
		}
		l.pushFront(w, o)
	}
	return dropped
}
