package transport

import (
	"runtime"
	"sync"
)

// Reply buffers over MaxPooledReply (catch-up fetch replies of several partitions at up to
// 10 MiB each, tens of MiB a reply) are kept for reuse in a free list of their own, bounded in
// bytes. A fresh buffer of that size costs more than the read that fills it: growing the
// frame zeroes it, and the zeroing takes the page faults of memory the runtime has handed back
// to the kernel; together that was 38% of the broker's CPU in a catch-up by 4 consumers with
// 10 MiB a partition (profiles/catchup-largeframes-20261202/, profiles/README.md).
//
// The list keeps at most maxFreeLarge bytes, best fit first, and lets go of what no reply took
// since the garbage collection before last (a victim list, as sync.Pool has), so an idle node
// gives the memory back within two or three collections (a sentinel made during a collection's
// mark phase survives it). The list's bytes are not counted in the in-flight budget: the
// memory a node may hold is the budget plus maxFreeLarge. A buffer is allocated with its capacity
// rounded up to an eighth of its power of two, so replies of nearly the same size (the usual
// catch-up: every partition at its limit) reuse one another's buffers.
//
// 128 MiB holds three replies of 40 MiB: with 64 MiB (one) a catch-up by 4 consumers still
// made a fresh frame often enough for its zeroing to be 6-16% of the broker's CPU, with 128
// MiB 1-2%, at no higher peak RSS (the frames are live in turn anyway). Held frames count
// in the heap the memory limit bounds, so under pressure the collections that age them come
// sooner.
const maxFreeLarge = 128 << 20

// largeFitSlack is how much larger than the request a free buffer may be and still be taken
// (an eighth, the step capacities are rounded to): more would hold memory the reply does not
// use, and the in-flight budget charges a reply its buffer's capacity.
const largeFitSlack = 8

var largeFrames = newLargeFreeList(maxFreeLarge)

type largeFreeList struct {
	mu       sync.Mutex
	max      int      // bytes kept at most, in cur and victim together
	cur      [][]byte // put since the last collection
	victim   [][]byte // put before it; dropped at the next
	curBytes int
	vicBytes int
}

// newLargeFreeList makes a list that ages at every collection. Its hook keeps it alive for
// good (the cleanup's argument): one per process (largeFrames), and a few in tests.
func newLargeFreeList(max int) *largeFreeList {
	l := &largeFreeList{max: max}
	l.armCollectionHook()
	return l
}

// collectionSentinel is allocated to be lost: its cleanup runs after the collection that
// finds it unreachable. It holds a pointer so that it is not a tiny allocation, which could
// share its block with live objects and outlive the collection.
type collectionSentinel struct{ _ *int }

// armCollectionHook makes l age its buffers at the next garbage collection, and again at each
// one after it (the cleanup re-arms it).
func (l *largeFreeList) armCollectionHook() {
	runtime.AddCleanup(new(collectionSentinel), func(l *largeFreeList) {
		l.age()
		l.armCollectionHook()
	}, l)
}

// age drops the victim list and makes the current one the victim.
func (l *largeFreeList) age() {
	l.mu.Lock()
	clear(l.victim)
	l.victim, l.cur = l.cur, l.victim[:0]
	l.vicBytes, l.curBytes = l.curBytes, 0
	l.mu.Unlock()
}

// get returns an empty buffer with capacity at least n: the smallest kept one that fits within
// the slack, or a new one.
func (l *largeFreeList) get(n int) []byte {
	l.mu.Lock()
	if b, ok := l.take(&l.cur, &l.curBytes, n); ok {
		l.mu.Unlock()
		return b
	}
	if b, ok := l.take(&l.victim, &l.vicBytes, n); ok {
		l.mu.Unlock()
		return b
	}
	l.mu.Unlock()
	return make([]byte, 0, largeCap(n))
}

func (l *largeFreeList) take(list *[][]byte, bytes *int, n int) ([]byte, bool) {
	best := -1
	for i, b := range *list {
		if c := cap(b); c >= n && c <= n+n/largeFitSlack && (best < 0 || c < cap((*list)[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	b := (*list)[best]
	last := len(*list) - 1
	(*list)[best] = (*list)[last]
	(*list)[last] = nil
	*list = (*list)[:last]
	*bytes -= cap(b)
	return b[:0], true
}

// put keeps b for a later get if the list has room for it.
func (l *largeFreeList) put(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.curBytes+cap(b) > l.max {
		return // no room even without the victims: keep them
	}
	// Room for the newest first: the victims are the ones least likely to be taken.
	for len(l.victim) > 0 && l.curBytes+l.vicBytes+cap(b) > l.max {
		last := len(l.victim) - 1
		l.vicBytes -= cap(l.victim[last])
		l.victim[last] = nil
		l.victim = l.victim[:last]
	}
	l.cur = append(l.cur, b[:0])
	l.curBytes += cap(b)
}

// largeCap is n rounded up to the next eighth of its power of two.
func largeCap(n int) int {
	step := 1
	for step*16 <= n {
		step <<= 1
	}
	return (n + step - 1) &^ (step - 1)
}
