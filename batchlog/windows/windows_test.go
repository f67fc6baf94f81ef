package windows

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"inlet/idem"
)

func win(key, lastWrite int64) *Window[int64] {
	w := &Window[int64]{State: idem.NewState(), Key: key}
	w.LastWrite = lastWrite
	return w
}

// order lists the node's keys from the most recently written, and checks both lists' links
// against each other and the counts.
func order(t *testing.T, l *Lists[int64]) []int64 {
	t.Helper()
	var keys []int64
	var prev *Window[int64]
	for w := l.head; w != nil; w = w.next {
		if w.prev != prev {
			t.Fatalf("window %d: prev link broken", w.Key)
		}
		keys = append(keys, w.Key)
		prev = w
	}
	if l.tail != prev || len(keys) != l.n {
		t.Fatalf("node list: tail or count broken (%d linked, n=%d)", len(keys), l.n)
	}
	total := 0
	for name, o := range l.owners {
		n := 0
		var oprev *Window[int64]
		for w := o.head; w != nil; w = w.onext {
			if w.owner != o || w.oprev != oprev {
				t.Fatalf("owner %q: window %d links broken", name, w.Key)
			}
			n++
			oprev = w
		}
		if o.tail != oprev || n != o.n || n == 0 {
			t.Fatalf("owner %q: tail or count broken (%d linked, n=%d)", name, n, o.n)
		}
		total += n
	}
	if total != l.n {
		t.Fatalf("owners hold %d windows, the node %d", total, l.n)
	}
	return keys
}

// TestListsTouchMovesToFrontAndChangesOwner: an append moves its window to the front of the
// node's list and of its writer's, taking a loaded window ("") over; an owner with no window
// left is forgotten.
func TestListsTouchMovesToFrontAndChangesOwner(t *testing.T) {
	var l Lists[int64]
	ws := []*Window[int64]{win(1, 0), win(2, 0), win(3, 0)}
	l.PushFront(ws[0], "")
	l.PushFront(ws[1], "a")
	l.PushFront(ws[2], "a")
	if got := order(t, &l); !slices.Equal(got, []int64{3, 2, 1}) {
		t.Fatalf("after pushes: %v", got)
	}
	l.Touch(ws[0], "b")
	if got := order(t, &l); !slices.Equal(got, []int64{1, 3, 2}) {
		t.Fatalf("after touching 1: %v", got)
	}
	if l.OwnerLen("") != 0 || l.OwnerLen("b") != 1 || l.OwnerLen("a") != 2 {
		t.Fatalf("owners: \"\"=%d a=%d b=%d", l.OwnerLen(""), l.OwnerLen("a"), l.OwnerLen("b"))
	}
	if _, ok := l.owners[""]; ok {
		t.Fatal("owner \"\" kept with no window")
	}
	l.Touch(ws[1], "") // "" keeps the owner
	if got := order(t, &l); !slices.Equal(got, []int64{2, 1, 3}) || ws[1].owner.name != "a" {
		t.Fatalf("after touching 2 with no owner: %v, owner %q", got, ws[1].owner.name)
	}
	l.Remove(ws[1])
	l.Remove(ws[1]) // not on the lists: left alone
	if got := order(t, &l); !slices.Equal(got, []int64{1, 3}) || l.OwnerLen("a") != 1 {
		t.Fatalf("after removing 2: %v, a=%d", got, l.OwnerLen("a"))
	}
}

// TestAdmitEvictsOnlyIdle: at a bound, Admit evicts the least recently written idle window
// without an open transaction among the last evictScan, and refuses when there is none.
func TestAdmitEvictsOnlyIdle(t *testing.T) {
	const idle = time.Minute
	now := int64(10 * time.Hour / time.Millisecond)
	old := now - 2*idle.Milliseconds()
	for _, tc := range []struct {
		name      string
		writes    []int64 // last writes, oldest first (keys 0, 1, ...)
		openTxn   []int64 // keys with an open transaction
		bounds    Bounds
		owner     string
		admit     bool
		evicted   int64 // -1: none
		remaining int
	}{
		{"UnderTheBound", []int64{old, old}, nil, Bounds{Max: 3, Idle: idle}, "a", true, -1, 2},
		{"NoBound", []int64{old, old}, nil, Bounds{Idle: idle}, "a", true, -1, 2},
		{"OldestIdleEvicted", []int64{old, old, now}, nil, Bounds{Max: 3, Idle: idle}, "a", true, 0, 2},
		{"AllLiveRefused", []int64{now, now, now}, nil, Bounds{Max: 3, Idle: idle}, "a", false, -1, 3},
		{"OpenTxnSkipped", []int64{old, old, now}, []int64{0}, Bounds{Max: 3, Idle: idle}, "a", true, 1, 2},
		{"OnlyOpenTxnsIdleRefused", []int64{old, old, now}, []int64{0, 1}, Bounds{Max: 3, Idle: idle}, "a", false, -1, 3},
		{"IdleBeyondScanRefused", append(slices.Repeat([]int64{old}, 10), now), []int64{0, 1, 2, 3, 4, 5, 6, 7}, Bounds{Max: 11, Idle: idle}, "a", false, -1, 11},
		{"PerOwnerBound", []int64{old, old}, nil, Bounds{PerOwner: 2, Idle: idle}, "a", true, 0, 1},
		{"PerOwnerOtherOwnerFree", []int64{now, now}, nil, Bounds{PerOwner: 2, Idle: idle}, "b", true, -1, 2},
		{"PerOwnerAllLiveRefused", []int64{now, now}, nil, Bounds{PerOwner: 2, Idle: idle}, "a", false, -1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Lists[int64]
			for k, lw := range tc.writes {
				w := win(int64(k), lw)
				if slices.Contains(tc.openTxn, int64(k)) {
					w.TxnFirstOffset = 0
				}
				l.PushFront(w, "a")
			}
			evicted := int64(-1)
			got := l.Admit(tc.bounds, tc.owner, now, func(w *Window[int64]) {
				if w.owner != nil {
					t.Fatal("evicted window still on the lists")
				}
				evicted = w.Key
			})
			if got != tc.admit || evicted != tc.evicted || l.Len() != tc.remaining {
				t.Fatalf("admit %v, evicted %d, %d left; want %v, %d, %d", got, evicted, l.Len(), tc.admit, tc.evicted, tc.remaining)
			}
			order(t, &l)
		})
	}
}

// TestLoadOrdersAndCaps: loaded windows are linked by last write (keys break ties), and
// beyond max the least recently written are dropped, except those with open transactions.
func TestLoadOrdersAndCaps(t *testing.T) {
	ws := []*Window[int64]{win(5, 30), win(1, 10), win(4, 10), win(2, 20), win(3, 5)}
	ws[4].TxnFirstOffset = 7 // key 3, the oldest: kept
	var l Lists[int64]
	l.PushFront(win(9, 0), "x") // emptied by Load
	dropped := l.Load(ws, 3, cmp.Compare[int64])
	var keys []int64
	for _, w := range dropped {
		keys = append(keys, w.Key)
	}
	if !slices.Equal(keys, []int64{1, 4}) {
		t.Fatalf("dropped %v, want [1 4]", keys)
	}
	if got := order(t, &l); !slices.Equal(got, []int64{5, 2, 3}) {
		t.Fatalf("loaded order %v, want [5 2 3]", got)
	}
	if l.OwnerLen("") != 3 || len(l.owners) != 1 {
		t.Fatalf("owners %v", l.owners)
	}
	if dropped := l.Load(nil, 3, cmp.Compare[int64]); len(dropped) != 0 || l.Len() != 0 || l.owners != nil {
		t.Fatalf("empty load: %d dropped, %d held, owners %v", len(dropped), l.Len(), l.owners)
	}
}

// TestTouchAllocatesNothing pins the committer's steady state: two principals with one
// producer each, writing in turn, move their windows to the front without allocating (a
// window that was its owner's only one must not drop and remake the owner).
func TestTouchAllocatesNothing(t *testing.T) {
	var l Lists[int64]
	a, b := win(1, 0), win(2, 0)
	l.PushFront(a, "alice")
	l.PushFront(b, "bob")
	allocs := testing.AllocsPerRun(1000, func() {
		l.Touch(a, "alice")
		l.Touch(b, "bob")
		l.Touch(a, "")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round of touches, want 0", allocs)
	}
	if l.Len() != 2 || l.OwnerLen("alice") != 1 || l.OwnerLen("bob") != 1 {
		t.Fatalf("lists after the touches: %d windows, alice %d, bob %d", l.Len(), l.OwnerLen("alice"), l.OwnerLen("bob"))
	}
	l.Touch(a, "bob") // a window taken over by another principal moves to its lists
	if l.OwnerLen("alice") != 0 || l.OwnerLen("bob") != 2 {
		t.Fatalf("after the takeover: alice %d, bob %d", l.OwnerLen("alice"), l.OwnerLen("bob"))
	}
}
