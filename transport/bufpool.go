package transport

import (
	"math/bits"
	"sync"

	"github.com/panjf2000/gnet/v2"
)

// Size-classed byte-slice pools (powers of two from 1 KiB to 16 MiB), in the manner of gnet's
// pkg/pool/byteslice: a request frame is copied once into a buffer of the smallest class that
// holds it, and everything after that works on slices of it. Larger frames are rare (a
// produce request is a few batches of at most message.max.bytes each) and get a buffer of
// their exact size that is not pooled, so a pool never pins one.
const (
	minClassShift = 10
	maxClassShift = 24
)

var classPools [maxClassShift - minClassShift + 1]sync.Pool

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// bufCap is the capacity of the buffer getBuf(n) returns: what it holds of memory.
func bufCap(n int) int {
	c := classOf(n)
	if c >= len(classPools) {
		return n
	}
	return 1 << (c + minClassShift)
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

// Out is a reply frame on its way to the socket: B is the bytes to write, appended to by the
// handler (AppendX(dst) style). Reply takes it over; its written callback (bound once, when
// the pool makes it) returns it to the pool, so queuing a reply allocates no closure.
type Out struct {
	B       []byte
	written gnet.AsyncCallback

	// While queued to the socket: the connection and budget its n bytes are charged to
	// (charge, taken).
	c *Conn
	b *budget
	n int64
	// sent is how much of B the pump has handed to the socket (pump.go).
	sent int
}

var outPool sync.Pool

func init() {
	outPool.New = func() any {
		ob := new(Out)
		ob.written = func(gc gnet.Conn, err error) error {
			c := ob.c
			ob.taken(gc, err)
			if c != nil {
				c.queued.Add(-1) // after taken, which looked at gnet's buffer (writeNow)
			}
			return nil
		}
		return ob
	}
}

// MaxPooledReply is the largest reply buffer an Out keeps when it goes back to outPool: a
// fetch reply of a few partitions at their default 1 MiB each stays with its Out. A larger
// one goes to largeFrames instead, so an Out that next carries a small reply does not pin it.
const MaxPooledReply = 8 << 20

// GetOut returns an empty pooled reply buffer with room for at least sizeHint bytes. A hint
// over MaxPooledReply takes a buffer from largeFrames.
func GetOut(sizeHint int) *Out {
	ob := outPool.Get().(*Out)
	if cap(ob.B) < sizeHint {
		if sizeHint > MaxPooledReply {
			ob.B = largeFrames.get(sizeHint)
		} else {
			ob.B = make([]byte, 0, sizeHint)
		}
	}
	ob.B = ob.B[:0]
	return ob
}

func putOut(ob *Out) {
	if cap(ob.B) > MaxPooledReply {
		largeFrames.put(ob.B)
		ob.B = nil
	}
	outPool.Put(ob)
}
