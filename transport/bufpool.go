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
//
// A reply may also carry bytes that lie elsewhere (Ref: a fetch's cold batches, left in the
// aligned buffers their direct reads landed in): they are written from there, in place, with
// writev, and the buffers holding them (Keep) are released when the Out goes back to the pool.
type Out struct {
	B       []byte
	written gnet.AsyncCallback

	refs      []outRef // in order: each is written after B[:at] and before B[at:]
	refBytes  int
	kept      []interface{ Release() }
	keptBytes int

	// While queued to the socket: the connection and budget its n bytes are charged to
	// (charge, taken).
	c *Conn
	b *budget
	n int64
	// sent is how much of the reply the pump has written to the socket (pump.go).
	sent int
}

type outRef struct {
	at int
	b  []byte
}

// Ref places b at position at of B (at most len(B) by the time the Out is replied): it is
// written after B[:at], before B[at:], and after what earlier calls placed at at. b must
// stay as it is until the Out is written: Keep what holds it.
func (o *Out) Ref(at int, b []byte) {
	o.refs = append(o.refs, outRef{at: at, b: b})
	o.refBytes += len(b)
}

// Keep holds buf, size bytes of memory, until the Out is written or dropped, then releases it.
// The size counts in the budget while the reply waits for the socket.
func (o *Out) Keep(buf interface{ Release() }, size int) {
	o.kept = append(o.kept, buf)
	o.keptBytes += size
}

// Refs is how many byte slices have been placed (Ref); DropRefs(n) forgets those placed
// after the first n (their buffers stay kept).
func (o *Out) Refs() int { return len(o.refs) }

// DropRefs forgets the slices placed after the first n.
func (o *Out) DropRefs(n int) {
	for _, r := range o.refs[n:] {
		o.refBytes -= len(r.b)
	}
	clear(o.refs[n:])
	o.refs = o.refs[:n]
}

// Len is the length of the reply: B and what was placed in it.
func (o *Out) Len() int { return len(o.B) + o.refBytes }

// memory is what the reply holds of memory: B's capacity and the buffers it keeps.
func (o *Out) memory() int64 { return int64(cap(o.B) + o.keptBytes) }

// appendVec appends to vec the pieces of the reply's bytes from offset from on, at most max
// bytes in at most maxIov pieces, and returns them with how many bytes they hold.
func (o *Out) appendVec(vec [][]byte, from, max, maxIov int) ([][]byte, int) {
	n, pos, b := 0, 0, 0 // bytes taken, logical position, position in B
	add := func(p []byte) bool {
		start := pos
		pos += len(p)
		if pos > from {
			if start < from {
				p = p[from-start:]
			}
			if p = p[:min(len(p), max-n)]; len(p) > 0 {
				vec = append(vec, p)
				n += len(p)
			}
		}
		return n < max && len(vec) < maxIov
	}
	for _, r := range o.refs {
		if !add(o.B[b:r.at]) || !add(r.b) {
			return vec, n
		}
		b = r.at
	}
	add(o.B[b:])
	return vec, n
}

var outPool sync.Pool

func init() {
	outPool.New = func() any {
		ob := new(Out)
		ob.written = func(gc gnet.Conn, err error) error { ob.taken(gc, err); return nil }
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
	for _, k := range ob.kept {
		k.Release()
	}
	clear(ob.kept)
	ob.kept, ob.keptBytes = ob.kept[:0], 0
	clear(ob.refs)
	ob.refs, ob.refBytes = ob.refs[:0], 0
	if cap(ob.B) > MaxPooledReply {
		largeFrames.put(ob.B)
		ob.B = nil
	}
	outPool.Put(ob)
}
