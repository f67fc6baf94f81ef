package server

import (
	"math/bits"
	"sync"
)

// Size-classed byte-slice pools (powers of two from 1 KiB to 128 MiB), in the manner of gnet's
// pkg/pool/byteslice: a request frame is copied once into a buffer of the smallest class that
// holds it, and everything after that works on slices of it.
const (
	minClassShift = 10
	maxClassShift = 27
)

var classPools [maxClassShift - minClassShift + 1]sync.Pool

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// getBuf returns a buffer with len n. Buffers larger than the largest class are not pooled.
func getBuf(n int) *[]byte {
	c := classOf(n)
	if c >= len(classPools) {
		b := make([]byte, n)
		return &b
	}
	if v := classPools[c].Get(); v != nil {
		b := v.(*[]byte)
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+minClassShift))
	return &b
}

func putBuf(b *[]byte) {
	c := classOf(cap(*b))
	if c >= len(classPools) || cap(*b) != 1<<(c+minClassShift) {
		return
	}
	*b = (*b)[:0]
	classPools[c].Put(b)
}
