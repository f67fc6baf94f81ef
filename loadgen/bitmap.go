package loadgen

import (
	"fmt"
	"math/bits"
	"sync/atomic"
)

// Bitmap is a set of sequence numbers, one bit each. A producer's sequence numbers are dense
// from 0, so 50 million records cost about 6 MB per bitmap instead of a map entry each.
//
// The bits live in fixed-size chunks allocated on first use and found through a fixed
// directory, so the bitmap grows without ever moving memory: Set is safe from any goroutine
// (the kgo promise goroutine marks acks while the producer goroutine keeps sending) and never
// locks. Reads that must see every Set need a happens-before edge with those Sets; Run gets it
// from the producers' ack counters.
type Bitmap struct {
	chunks [bitmapChunks]atomic.Pointer[bitmapChunk]
}

const (
	bitmapChunkBits  = 1 << 20 // 128 KiB of words per chunk
	bitmapChunkWords = bitmapChunkBits / 64
	bitmapChunks     = 1 << 14

	// BitmapCapacity bounds the sequence numbers of one producer: 2^34, about 4.8 hours of
	// one producer at a million records a second. Run stops a producer that reaches it.
	BitmapCapacity = bitmapChunkBits * bitmapChunks
)

type bitmapChunk [bitmapChunkWords]atomic.Uint64

// NewBitmap returns an empty bitmap. Its directory alone is 128 KiB, so keep it behind a pointer.
func NewBitmap() *Bitmap { return new(Bitmap) }

func (b *Bitmap) chunk(i uint64, create bool) *bitmapChunk {
	if i >= BitmapCapacity {
		panic(fmt.Sprintf("BUG: loadgen bitmap index %d beyond capacity %d", i, uint64(BitmapCapacity)))
	}
	slot := &b.chunks[i/bitmapChunkBits]
	c := slot.Load()
	if c == nil && create {
		fresh := new(bitmapChunk)
		if slot.CompareAndSwap(nil, fresh) {
			return fresh
		}
		c = slot.Load()
	}
	return c
}

// Set adds i and reports whether it was already present.
func (b *Bitmap) Set(i uint64) (wasSet bool) {
	c := b.chunk(i, true)
	mask := uint64(1) << (i % 64)
	return c[(i%bitmapChunkBits)/64].Or(mask)&mask != 0
}

// Has reports whether i is present.
func (b *Bitmap) Has(i uint64) bool {
	return b.word(i/64)&(uint64(1)<<(i%64)) != 0
}

// word returns the w-th 64-bit word (bits 64w..64w+63).
func (b *Bitmap) word(w uint64) uint64 {
	c := b.chunk(w*64, false)
	if c == nil {
		return 0
	}
	return c[w%bitmapChunkWords].Load()
}

// CountBelow returns how many members are below n.
func (b *Bitmap) CountBelow(n uint64) uint64 {
	var total uint64
	eachWord(b, n, func(_, word uint64) bool {
		total += uint64(bits.OnesCount64(word))
		return true
	})
	return total
}

// eachWord calls fn with the index and bits of every word of b that holds members below n
// (bits at or above n masked off), skipping chunks never allocated, until fn returns false.
func eachWord(b *Bitmap, n uint64, fn func(w, word uint64) bool) {
	n = min(n, BitmapCapacity)
	for c := uint64(0); c*bitmapChunkBits < n; c++ {
		chunk := b.chunks[c].Load()
		if chunk == nil {
			continue
		}
		for i := range chunk {
			w := c*bitmapChunkWords + uint64(i)
			if w*64 >= n {
				return
			}
			word := chunk[i].Load()
			if rest := n - w*64; rest < 64 {
				word &= uint64(1)<<rest - 1
			}
			if word != 0 && !fn(w, word) {
				return
			}
		}
	}
}

// eachDifference calls fn for every i below n that is in a but not in b, in increasing order,
// until fn returns false. It walks a's words, so large ranges with few members are cheap.
func eachDifference(a, b *Bitmap, n uint64, fn func(i uint64) bool) {
	eachWord(a, n, func(w, word uint64) bool {
		diff := word &^ b.word(w)
		for diff != 0 {
			bit := uint64(bits.TrailingZeros64(diff))
			if !fn(w*64 + bit) {
				return false
			}
			diff &= diff - 1
		}
		return true
	})
}

// rangeWords calls fn with the index of every word that holds bits of [lo, hi) and the mask of
// those bits in it, in increasing order.
func rangeWords(lo, hi uint64, fn func(w, mask uint64)) {
	hi = min(hi, BitmapCapacity)
	for w := lo / 64; w*64 < hi; w++ {
		mask := ^uint64(0)
		if w == lo/64 {
			mask &^= uint64(1)<<(lo%64) - 1
		}
		if rest := hi - w*64; rest < 64 {
			mask &= uint64(1)<<rest - 1
		}
		fn(w, mask)
	}
}

// CountRange returns how many members are in [lo, hi).
func (b *Bitmap) CountRange(lo, hi uint64) uint64 {
	var total uint64
	rangeWords(lo, hi, func(w, mask uint64) { total += uint64(bits.OnesCount64(b.word(w) & mask)) })
	return total
}

// copyRange adds to b the members of src in [lo, hi), a word at a time.
func (b *Bitmap) copyRange(src *Bitmap, lo, hi uint64) {
	rangeWords(lo, hi, func(w, mask uint64) {
		if set := src.word(w) & mask; set != 0 {
			b.chunk(w*64, true)[w%bitmapChunkWords].Or(set)
		}
	})
}
