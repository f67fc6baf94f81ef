package segments

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"inlet/segfs"
)

// Cold reads: a planned batch the tail cache does not hold is read from its segment with
// O_DIRECT (segment.rd), in block-aligned reads into a pooled aligned buffer, and copied from
// there into the caller's buffer. Reading a cold file through the page cache costs the kernel
// about four times the CPU of the direct read and the copy together (it allocates, fills and
// later reclaims the cache's pages, and copies out of them), and the segments are written with
// O_DIRECT, so the cache never holds what a catch-up reads unless an earlier read put it there.
//
// Planned batches of one segment that lie close together (each within coalesceGap of the
// previous one's end, all within one readChunk) are read in one aligned read: a consumer of a
// partition written in large runs (one producer per partition) reads its batches with a system
// call per chunk rather than per batch.
//
// A plan read while no other plan's runs are being read has its runs read with several in
// flight: the reading goroutine (a connection's worker) offers each run but its last to the
// store's helpers (coldHelpers goroutines, started at the first such read, stopped by Close)
// and reads those no helper is free to take itself, then waits for the helpers' part. A run is
// offered only to an idle helper, so at most coldHelpers reads are in flight beyond the
// workers' own, each with its readChunk of scratch. Plans read at the same time (consumers
// catching up together) read their runs one after the other: they keep the disk busy between
// them, and handing runs off only costs CPU then (measured: results/coldread-ab-helpers-*).

const (
	// readChunk is the largest direct read and the size of a scratch buffer.
	readChunk = 1 << 20
	// coalesceGap is the most bytes of other data between two planned batches that are read
	// in one read; more would cost the disk more than the system call it saves.
	coalesceGap = 64 << 10
	// coldHelpers is how many goroutines of a store read runs for the plans of others.
	coldHelpers = 3
)

// coldRun is a run of cold spans read at once (read): AppendTo's is copied into dst (readRun),
// AppendRefs' is left in into, the aligned buffer read from from (up to end) of seg.
type coldRun struct {
	dst   []byte
	spans []span
	into  []byte
	seg   *segment
	from  int64
	end   int64
	err   error
	wg    *sync.WaitGroup // set when a helper reads it
}

// read reads r.
func (r *coldRun) read() error {
	if r.into == nil {
		return readRun(r.dst, r.spans)
	}
	for at := 0; at < len(r.into); at += readChunk {
		buf := r.into[at:min(at+readChunk, len(r.into))]
		from := r.from + int64(at)
		if err := readAligned(buf, r.seg, from, min(r.end, from+int64(len(buf)))); err != nil {
			return err
		}
	}
	return nil
}

// arena hands out the aligned buffers AppendRefs' runs are read into: parts of buffers from
// the store's staging pools, each at most readChunk unless one run is larger, so that a reply
// of many small runs holds about the bytes it reads, not a buffer per run.
type arena struct {
	left []byte // what is left of the current buffer
}

// take returns n bytes (a multiple of blockSize) for a run of p ending before span j; a new
// buffer is kept by refs, sized for the rest of the plan (each later span and a block of
// alignment) up to readChunk.
func (a *arena) take(p *ReadPlan, refs Refs, n, j int) []byte {
	if n > len(a.left) {
		size := n
		for k := j; k < len(p.spans) && size < readChunk; k++ {
			size += p.spans[k].n + blockSize
		}
		switch size = max(n, min(size, readChunk)); {
		case size == readChunk:
			if m := readArenas.get(); m != nil {
				refs.Keep(m, len(m.b))
				a.left = m.b
				break
			}
			fallthrough
		default:
			box := p.store.getStage(size)
			refs.Keep(box, cap(box.b))
			a.left = box.b[:cap(box.b)]
		}
	}
	b := a.left[:n:n]
	a.left = a.left[n:]
	return b
}

// coldReaders are a store's helpers; the zero value has none started.
type coldReaders struct {
	once    sync.Once
	runs    chan *coldRun // unbuffered: a send succeeds only to an idle helper
	done    chan struct{} // closed by stop
	stopped atomic.Bool
	// reading counts the plans reading several runs at once: the helpers are for a plan read
	// alone (a single consumer catching up); beside others, the other readers keep the disk
	// busy, and the helpers would only add handoffs.
	reading atomic.Int32
}

func (c *coldReaders) start() {
	c.once.Do(func() {
		c.runs, c.done = make(chan *coldRun), make(chan struct{})
		for range coldHelpers {
			go func() {
				for {
					select {
					case r := <-c.runs:
						r.err = r.read()
						r.wg.Done()
					case <-c.done:
						return
					}
				}
			}()
		}
	})
}

// stop ends the helpers (Store.Close); a read after it reads all its runs itself.
func (c *coldReaders) stop() {
	c.once.Do(func() {}) // none start after this
	if c.done != nil && c.stopped.CompareAndSwap(false, true) {
		close(c.done)
	}
}

// readRuns reads the plan's cold runs, several at once where helpers are free.
func (p *ReadPlan) readRuns() error {
	switch len(p.runs) {
	case 0:
		return nil
	case 1:
		return p.runs[0].read()
	}
	c := &p.store.cold
	alone := c.reading.Add(1) == 1
	defer c.reading.Add(-1)
	if !alone {
		for k := range p.runs {
			if err := p.runs[k].read(); err != nil {
				return err
			}
		}
		return nil
	}
	c.start()
	if p.wg == nil {
		p.wg = new(sync.WaitGroup)
	}
	for k := range p.runs {
		r := &p.runs[k]
		if k < len(p.runs)-1 && c.runs != nil {
			r.wg = p.wg
			p.wg.Add(1)
			select {
			case c.runs <- r:
				continue
			default:
				p.wg.Done()
			}
		}
		r.err = r.read()
	}
	p.wg.Wait()
	for k := range p.runs {
		if err := p.runs[k].err; err != nil {
			return err
		}
	}
	return nil
}

// readArenas are the readChunk buffers that AppendRefs' runs land in, mapped outside the Go
// heap. A catch-up holds tens of them per reply until the reply is written; as heap they were
// zeroed at each allocation and dropped from their pool by each collection (frequent, with
// that much of the heap in flight under the memory limit), so most were allocated afresh.
// Up to maxFreeArenas wait here between replies; more are unmapped.
var readArenas arenaList

const maxFreeArenas = 64

type arenaList struct {
	mu   sync.Mutex
	free []*arenaBuf
}

// arenaBuf is one mapped buffer of readChunk bytes (page-aligned, as O_DIRECT needs).
type arenaBuf struct{ b []byte }

// get returns a free buffer or maps one; nil if the mapping fails (then the heap serves).
func (l *arenaList) get() *arenaBuf {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		m := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return m
	}
	l.mu.Unlock()
	b, err := syscall.Mmap(-1, 0, readChunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return &arenaBuf{b: b}
}

// Release hands m back to readArenas, or unmaps it when enough wait there.
func (m *arenaBuf) Release() {
	l := &readArenas
	l.mu.Lock()
	if len(l.free) < maxFreeArenas {
		l.free = append(l.free, m)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	_ = syscall.Munmap(m.b)
}

// directReadFS is the optional method of a segfs.FS that opens a file for direct reads.
type directReadFS interface {
	OpenReadDirect(name string) (segfs.File, error)
}

// scratch holds the aligned buffers direct reads land in: one per read in progress (a
// connection's worker holds one while it reads a fetch's cold batches), readChunk each.
var scratch = sync.Pool{New: func() any {
	b := alignedBuffer(readChunk)
	return &b
}}

func alignDown(n int64) int64 { return n &^ (blockSize - 1) }

// readRun fills dst with the batches of spans, one after the other: all of one segment with
// an O_DIRECT reader, in increasing positions, within one readChunk of aligned reading (or a
// single span of any size).
func readRun(dst []byte, spans []span) error {
	seg := spans[0].seg
	if len(spans) == 1 {
		return readDirect(dst, seg, spans[0].pos)
	}
	last := &spans[len(spans)-1]
	from := alignDown(spans[0].pos)
	end := last.pos + int64(last.n)
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	buf := (*bp)[:alignUp(end)-from]
	if err := readAligned(buf, seg, from, end); err != nil {
		return err
	}
	at := 0
	for i := range spans {
		sp := &spans[i]
		at += copy(dst[at:at+sp.n], buf[sp.pos-from:])
	}
	return nil
}

// readDirect fills dst with the bytes of seg at pos, in aligned reads of up to readChunk.
func readDirect(dst []byte, seg *segment, pos int64) error {
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	for len(dst) > 0 {
		from := alignDown(pos)
		end := min(pos+int64(len(dst)), from+readChunk)
		buf := (*bp)[:alignUp(end)-from]
		if err := readAligned(buf, seg, from, end); err != nil {
			return err
		}
		n := copy(dst, buf[pos-from:end-from])
		dst, pos = dst[n:], pos+int64(n)
	}
	return nil
}

// readAligned reads buf (block-aligned, as is from) from seg's direct reader at from; the
// bytes up to end must be there (the file may end sooner than buf).
func readAligned(buf []byte, seg *segment, from, end int64) error {
	n, err := seg.rd.ReadAt(buf, from)
	if err != nil && !(errors.Is(err, io.EOF) && from+int64(n) >= end) {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("batchlog: read segment %d at %d: %w", seg.id, from, err)
	}
	return nil
}

// runEnd is the end of the run of spans from i (not in the tail cache) that one read takes:
// the following spans of the same segment, each close after the previous one, within one
// readChunk. Each span it adds is first looked up in the tail cache, as every batch is: a hit
// ends the run, and is copied to the end of dst, which is returned with it. copied: the run's
// own bytes are copied to dst too (AppendTo: dst was grown to its final size and holds the
// first span), and dst is returned grown over them.
func (p *ReadPlan) runEnd(i int, dst []byte, copied bool) (int, []byte, bool) {
	first := &p.spans[i]
	from := alignDown(first.pos)
	end := first.pos + int64(first.n)
	j := i + 1
	for ; j < len(p.spans); j++ {
		sp := &p.spans[j]
		if sp.seg != first.seg || sp.pos < end || sp.pos-end > coalesceGap ||
			alignUp(sp.pos+int64(sp.n))-from > readChunk {
			return j, dst, false
		}
		at := len(dst)
		if copied {
			dst = dst[:at+sp.n]
			if p.store.fromTail(dst[at:], sp.seg, sp.pos) {
				return j, dst, true
			}
		} else if p.store.inTail(sp.seg, sp.pos, sp.n) {
			dst = slices.Grow(dst, sp.n)[:at+sp.n]
			if p.store.fromTail(dst[at:], sp.seg, sp.pos) {
				return j, dst, true
			}
			dst = dst[:at] // evicted since: read with the run
		}
		end = sp.pos + int64(sp.n)
	}
	return j, dst, false
}
