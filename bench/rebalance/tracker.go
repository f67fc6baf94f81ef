package rebalance

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Tracker is the measuring logic of a run, kept apart from the clients so that it can be
// tested without a broker. Members report what their client says they own (the
// OnPartitionsAssigned, OnPartitionsRevoked and OnPartitionsLost callbacks) and every record
// they poll, with the instant it was produced; all instants are durations on one monotonic
// clock (time since the run's base instant).
//
// Definition of the measured time. At Begin(t) the clock of a phase starts (for the
// rebalance phase: just before the joining member's client is created). The group has
// settled once
//   - the partitions owned by the members (as their clients say) are pairwise disjoint and
//     cover all partitions,
//   - the expected number of members each own some, and the counts differ by at most one
//     (the uniform and cooperative-sticky assignors' balance), and
//   - every partition has delivered, to the member that owns it, a record produced at or
//     after t, polled after that member's latest assignment of the partition.
//
// The phase's time is then the latest of those first deliveries minus t: the time until
// every partition is consumed again by its settled owner. A partition that stayed where it
// was counts from its first record produced after t; a moved one from the first such record
// its new owner polled. A record polled by a member that no longer owns the partition (or
// not yet) does not count, so a partition still drained by its old owner is not "consumed
// again" until its new owner reads it.
type Tracker struct {
	mu         sync.Mutex
	partitions int32
	begin      time.Duration
	owner      map[int32]string // partition -> member, as the members' clients report
	owned      map[string]map[int32]bool
	first      map[int32]time.Duration // partition -> first counted delivery to its owner
	events     []Event
}

// Event is one line of a run's timeline.
type Event struct {
	At     time.Duration // on the tracker's clock
	Member string
	What   string // "assigned", "revoked", "lost", "first"
	Parts  []int32
}

// NewTracker tracks a topic of the given partition count.
func NewTracker(partitions int32) *Tracker {
	return &Tracker{partitions: partitions, owner: map[int32]string{}, owned: map[string]map[int32]bool{},
		first: map[int32]time.Duration{}}
}

// Begin starts a phase at t: only records produced at or after t count from now on, and
// first deliveries of earlier phases are forgotten (ownership is kept).
func (tr *Tracker) Begin(t time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.begin = t
	clear(tr.first)
}

// Assigned records that member's client now also owns parts (at now).
func (tr *Tracker) Assigned(member string, parts []int32, now time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := tr.owned[member]
	if m == nil {
		m = map[int32]bool{}
		tr.owned[member] = m
	}
	for _, p := range parts {
		m[p] = true
		// A partition claimed by a second member before the first gave it up shows as
		// overlapping ownership (owner keeps the latest claim; settled() checks the sets).
		tr.owner[p] = member
		delete(tr.first, p)
	}
	if len(parts) > 0 {
		tr.events = append(tr.events, Event{At: now, Member: member, What: "assigned", Parts: sorted(parts)})
	}
}

// Revoked records that member's client gave up parts (what is "revoked" or "lost").
func (tr *Tracker) Revoked(member string, parts []int32, now time.Duration, what string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := tr.owned[member]
	for _, p := range parts {
		delete(m, p)
		if tr.owner[p] == member {
			delete(tr.owner, p)
			delete(tr.first, p)
		}
	}
	if len(parts) > 0 {
		tr.events = append(tr.events, Event{At: now, Member: member, What: what, Parts: sorted(parts)})
	}
}

// Delivered records that member polled a record of partition p produced at producedAt, at
// now. It counts only when member owns p and the record was produced in the current phase.
func (tr *Tracker) Delivered(member string, p int32, producedAt, now time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if producedAt < tr.begin || tr.owner[p] != member || !tr.owned[member][p] {
		return
	}
	if _, ok := tr.first[p]; !ok {
		tr.first[p] = now
	}
}

// Settled reports whether the group has settled over members members (see Tracker), and if
// so the phase's time: the latest first delivery minus the phase's start.
func (tr *Tracker) Settled(members int) (time.Duration, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.settled(members)
}

func (tr *Tracker) settled(members int) (time.Duration, bool) {
	seen := map[int32]bool{}
	lo, hi, owning := int(tr.partitions)+1, -1, 0
	for _, m := range tr.owned {
		n := len(m)
		if n == 0 {
			continue
		}
		owning++
		lo, hi = min(lo, n), max(hi, n)
		for p := range m {
			if seen[p] {
				return 0, false // owned twice
			}
			seen[p] = true
		}
	}
	if owning != members || hi-lo > 1 || len(seen) != int(tr.partitions) {
		return 0, false
	}
	var last time.Duration
	for p := range tr.partitions {
		at, ok := tr.first[p]
		if !ok {
			return 0, false
		}
		last = max(last, at)
	}
	return max(last-tr.begin, 0), true
}

// Events returns the timeline so far, with the first counted delivery of each partition of
// the current phase as "first" events, in time order.
func (tr *Tracker) Events() []Event {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	evs := slices.Clone(tr.events)
	for p, at := range tr.first {
		evs = append(evs, Event{At: at, Member: tr.owner[p], What: "first", Parts: []int32{p}})
	}
	slices.SortStableFunc(evs, func(a, b Event) int {
		if a.At != b.At {
			return int(a.At - b.At)
		}
		return slices.Compare(a.Parts, b.Parts)
	})
	return evs
}

// Owned returns each member's partitions, sorted.
func (tr *Tracker) Owned() map[string][]int32 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string][]int32{}
	for m, ps := range tr.owned {
		for p := range ps {
			out[m] = append(out[m], p)
		}
		slices.Sort(out[m])
	}
	return out
}

func sorted(ps []int32) []int32 {
	s := slices.Clone(ps)
	slices.Sort(s)
	return s
}

// String renders an event relative to origin: "+1.234s m5 assigned [3 7]".
func (e Event) String(origin time.Duration) string {
	return fmt.Sprintf("%+.3fs %s %s %v", (e.At - origin).Seconds(), e.Member, e.What, e.Parts)
}
