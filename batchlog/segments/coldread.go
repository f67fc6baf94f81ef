package segments

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

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

// coldRun is a run of cold spans read at once (readRun), into dst.
type coldRun struct {
	dst   []byte
	spans []span
	err   error
	wg    *sync.WaitGroup // set when a helper reads it
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
						r.err = readRun(r.dst, r.spans)
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
		return readRun(p.runs[0].dst, p.runs[0].spans)
	}
	c := &p.store.cold
	alone := c.reading.Add(1) == 1
	defer c.reading.Add(-1)
	if !alone {
		for k := range p.runs {
			if err := readRun(p.runs[k].dst, p.runs[k].spans); err != nil {
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
		r.err = readRun(r.dst, r.spans)
	}
	p.wg.Wait()
	for k := range p.runs {
		if err := p.runs[k].err; err != nil {
			return err
		}
	}
	return nil
}

// directReadFS is the optional method of a segfs.FS that opens a file for direct reads.
type directReadFS interface {
	OpenReadDirect(name string) (segfs.File, error)
}

// scratch holds the aligned buffers direct reads land in: one per read in progress (a
// connection's worker holds one while it reads a fetch's cold batches), readChunk each.
var scratch = sync.Pool{New: func() any {
	b := segfs.AlignedBuffer(readChunk)
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

// runEnd is the end of the run of spans from i (not in the tail cache; its bytes at dst[at:])
// that readRun reads at once: the following spans of the same segment, each close after the
// previous one, within one readChunk. Each span it adds is first looked up in the tail cache,
// as every batch is (a hit ends the run; dst then holds that batch too). It returns the run's
// end and dst grown over the spans it took.
func (p *ReadPlan) runEnd(i int, dst []byte) (int, []byte, bool) {
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
		dst = dst[:at+sp.n]
		if p.store.fromTail(dst[at:], sp.seg, sp.pos) {
			return j, dst, true
		}
		end = sp.pos + int64(sp.n)
	}
	return j, dst, false
}
