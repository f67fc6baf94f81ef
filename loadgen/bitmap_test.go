package loadgen

import (
	"sync"
	"testing"
)

func TestBitmapSetHasCount(t *testing.T) {
	b := NewBitmap()
	// Members on both sides of word and chunk boundaries.
	members := []uint64{0, 1, 63, 64, 65, bitmapChunkBits - 1, bitmapChunkBits, 3*bitmapChunkBits + 5, BitmapCapacity - 1}
	for _, i := range members {
		if b.Set(i) {
			t.Fatalf("Set(%d) reports a new member as present", i)
		}
		if !b.Set(i) {
			t.Fatalf("second Set(%d) reports it absent", i)
		}
	}
	for _, i := range members {
		if !b.Has(i) {
			t.Fatalf("Has(%d) = false", i)
		}
	}
	for _, i := range []uint64{2, 62, 66, bitmapChunkBits + 1, 2 * bitmapChunkBits} {
		if b.Has(i) {
			t.Fatalf("Has(%d) = true for a non-member", i)
		}
	}
	if got := b.CountBelow(BitmapCapacity); got != uint64(len(members)) {
		t.Fatalf("CountBelow(capacity) = %d, want %d", got, len(members))
	}
	if got := b.CountBelow(64); got != 3 {
		t.Fatalf("CountBelow(64) = %d, want 3 (0, 1, 63)", got)
	}
	if got := b.CountBelow(65); got != 4 {
		t.Fatalf("CountBelow(65) = %d, want 4", got)
	}
}

func TestBitmapSetBeyondCapacityPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Set beyond capacity did not panic")
		}
	}()
	NewBitmap().Set(BitmapCapacity)
}

func TestEachDifference(t *testing.T) {
	a, b := NewBitmap(), NewBitmap()
	for i := uint64(0); i < 200; i++ {
		a.Set(i)
		if i%7 != 0 {
			b.Set(i)
		}
	}
	a.Set(bitmapChunkBits + 9) // in a chunk b never allocated
	a.Set(500)                 // beyond n below
	var got []uint64
	eachDifference(a, b, bitmapChunkBits+10, func(i uint64) bool {
		if i != 500 {
			got = append(got, i)
		}
		return true
	})
	var want []uint64
	for i := uint64(0); i < 200; i += 7 {
		want = append(want, i)
	}
	want = append(want, bitmapChunkBits+9)
	if len(got) != len(want) {
		t.Fatalf("difference %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("difference %v, want %v", got, want)
		}
	}

	var early []uint64
	eachDifference(a, b, 100, func(i uint64) bool { early = append(early, i); return len(early) < 2 })
	if len(early) != 2 {
		t.Fatalf("stopping early gave %v", early)
	}
	var bounded []uint64
	eachDifference(a, b, 8, func(i uint64) bool { bounded = append(bounded, i); return true })
	if len(bounded) != 2 || bounded[0] != 0 || bounded[1] != 7 {
		t.Fatalf("difference below 8 = %v, want [0 7]", bounded)
	}
}

// Acks arrive on kgo's promise goroutines while chunks are still being allocated; run with -race.
func TestBitmapConcurrentSet(t *testing.T) {
	b := NewBitmap()
	const perGoroutine = 3 * bitmapChunkBits / 8
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			// Interleaved so goroutines race for the same words and chunks.
			for i := uint64(0); i < perGoroutine; i++ {
				b.Set(i*8 + uint64(g))
			}
		})
	}
	wg.Wait()
	if got := b.CountBelow(BitmapCapacity); got != 8*perGoroutine {
		t.Fatalf("count %d, want %d", got, 8*perGoroutine)
	}
}
