// Package consume is the Kafka clients of bench's consume phase (package bench: consume.go,
// consume_run.go): the readers, kgo consumers with directly assigned partitions that read a
// topic from its start offsets up to the end offsets listed after the fill (the catch-up) and
// then follow its end, timing each stamped record (the tail); the tail's producers, which send
// stamped records on an open-loop schedule (producers.go, stamp.go); and the listing of a
// topic's offsets. The phase's settings, its figures and the broker's /proc readings are
// package bench's. The only lock is a tail producer's errMu, taken alone.
package consume

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/loadgen"
)

// ReaderConfig is the readers' clients: Consumers of them share the Partitions of Topic on the
// broker at Addr, with kgo's fetch settings of the same names.
type ReaderConfig struct {
	Addr                   string
	Topic                  string
	Partitions, Consumers  int
	FetchMaxBytes          int32
	FetchMaxPartitionBytes int32
	FetchMinBytes          int32
	FetchMaxWait           time.Duration
}

// Readers are the phase's consumers, each reading on a goroutine of its own: the catch-up to
// the end offsets, then the tail until Stop.
type Readers struct {
	rs   []*reader
	stop func()
}

// reader is one consumer client with directly assigned partitions. Its goroutine (run) reads
// the catch-up, closes caughtUp, then follows the tail until its context ends.
type reader struct {
	client   *kgo.Client
	base     time.Time
	caughtUp chan struct{}

	// Owned by run until caughtUp is closed (or run has returned).
	cu      *catchup
	last    time.Time // when the last catch-up record arrived
	lastErr error     // the last fetch error other than a cancellation

	// Tail: updated by run, read by the phase's loop.
	received  atomic.Uint64
	malformed atomic.Uint64
	lastRecv  atomic.Int64 // stamp nanos of the last receive with records
	e2e       loadgen.Histogram
}

// StartReaders creates cfg.Consumers clients, the partitions dealt round-robin among them and
// each assigned from starts[p] (the catch-up reads up to ends[p]), and starts their goroutines,
// which read until Stop or until ctx ends. base is the origin of the tail's stamps.
func StartReaders(ctx context.Context, cfg ReaderConfig, starts, ends []int64, base time.Time) (*Readers, error) {
	var readers []*reader
	for i, parts := range splitPartitions(cfg.Partitions, cfg.Consumers) {
		offsets := map[int32]kgo.Offset{}
		for _, p := range parts {
			offsets[p] = kgo.NewOffset().At(starts[p])
		}
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(cfg.Addr),
			kgo.ClientID(fmt.Sprintf("inlet-bench-consumer-%d", i)),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}),
			kgo.FetchMaxBytes(cfg.FetchMaxBytes),
			kgo.FetchMaxPartitionBytes(cfg.FetchMaxPartitionBytes),
			kgo.FetchMinBytes(cfg.FetchMinBytes),
			kgo.FetchMaxWait(cfg.FetchMaxWait),
			kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		)
		if err != nil {
			for _, r := range readers {
				r.client.Close()
			}
			return nil, err
		}
		readers = append(readers, &reader{client: cl, base: base, caughtUp: make(chan struct{}), cu: newCatchup(parts, starts, ends)})
	}
	readCtx, stopReaders := context.WithCancel(ctx)
	var exited sync.WaitGroup
	for _, r := range readers {
		exited.Go(func() { r.run(readCtx) })
	}
	return &Readers{rs: readers, stop: sync.OnceFunc(func() {
		stopReaders()
		exited.Wait()
		for _, r := range readers {
			r.client.Close()
		}
	})}, nil
}

// Stop ends the readers' goroutines and closes their clients; after it the catch-up figures
// may be read whatever state the readers were left in. Later calls do nothing.
func (rs *Readers) Stop() { rs.stop() }

// WaitCaughtUp waits until every reader has caught up; true when timeout passed first or ctx
// ended.
func (rs *Readers) WaitCaughtUp(ctx context.Context, timeout time.Duration) (timedOut bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, r := range rs.rs {
		select {
		case <-r.caughtUp:
		case <-deadline.C:
			return true
		case <-ctx.Done():
			return true
		}
	}
	return false
}

// Catchup sums the readers' catch-up counts, says when the last catch-up record arrived, and
// lists the partitions not read to their end. The readers must be caught up or stopped.
func (rs *Readers) Catchup() (records, bytes uint64, last time.Time, unfinished []string) {
	for _, r := range rs.rs {
		records += r.cu.records
		bytes += r.cu.bytes
		if r.last.After(last) {
			last = r.last
		}
		unfinished = append(unfinished, r.cu.unfinished()...)
	}
	return records, bytes, last, unfinished
}

// FetchError is the last fetch error of the first reader that had one (nil: none). The readers
// must be caught up or stopped.
func (rs *Readers) FetchError() error {
	for _, r := range rs.rs {
		if r.lastErr != nil {
			return r.lastErr
		}
	}
	return nil
}

// Received is how many tail records the readers have received so far.
func (rs *Readers) Received() uint64 {
	var n uint64
	for _, r := range rs.rs {
		n += r.received.Load()
	}
	return n
}

// Tail is the readers' tail figures: the records received, those that carried no valid stamp,
// the stamp time of the last receive with records, and the end-to-end latencies merged into
// e2e.
func (rs *Readers) Tail(e2e *loadgen.HistogramSnapshot) (received, malformed uint64, lastRecv int64) {
	var one loadgen.HistogramSnapshot
	for _, r := range rs.rs {
		received += r.received.Load()
		malformed += r.malformed.Load()
		lastRecv = max(lastRecv, r.lastRecv.Load())
		r.e2e.Snapshot(&one)
		e2e.Merge(&one)
	}
	return received, malformed, lastRecv
}

func (r *reader) run(ctx context.Context) {
	caught := false
	notBefore := r.base.UnixNano()
	for {
		if !caught && r.cu.done() {
			caught = true
			close(r.caughtUp)
		}
		fetches := r.client.PollFetches(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				r.lastErr = err
			}
		})
		if !caught {
			n := 0
			fetches.EachRecord(func(rec *kgo.Record) {
				if r.cu.observe(rec.Partition, rec.Offset, len(rec.Value)) {
					n++
				}
			})
			if n > 0 {
				r.last = now
			}
			continue
		}
		recv := StampNanos(r.base, now)
		var n, bad uint64
		fetches.EachRecord(func(rec *kgo.Record) {
			n++
			if us, ok := e2eMicros(rec.Value, notBefore, recv); ok {
				r.e2e.Record(us)
			} else {
				bad++
			}
		})
		if n > 0 {
			r.lastRecv.Store(recv)
			r.malformed.Add(bad)
			r.received.Add(n)
		}
	}
}

// splitPartitions deals partitions 0..n-1 round-robin over consumers clients.
func splitPartitions(n, consumers int) [][]int32 {
	out := make([][]int32, consumers)
	for p := range n {
		out[p%consumers] = append(out[p%consumers], int32(p))
	}
	return out
}

// catchup is one consumer's progress through its partitions during the catch-up read:
// offsets [next, end) of each are still to come. It belongs to the consumer's goroutine.
type catchup struct {
	next, end map[int32]int64
	remaining int // partitions with next < end
	records   uint64
	bytes     uint64
}

func newCatchup(parts []int32, start, end []int64) *catchup {
	c := &catchup{next: map[int32]int64{}, end: map[int32]int64{}}
	for _, p := range parts {
		c.next[p], c.end[p] = start[p], end[p]
		if start[p] < end[p] {
			c.remaining++
		}
	}
	return c
}

// observe counts a record of partition p at offset with a value of size bytes, when it is one
// the catch-up still waits for; it returns whether it counted.
func (c *catchup) observe(p int32, offset int64, size int) bool {
	end, ok := c.end[p]
	if !ok || offset < c.next[p] || offset >= end {
		return false
	}
	c.records++
	c.bytes += uint64(size)
	c.next[p] = offset + 1
	if offset+1 == end {
		c.remaining--
	}
	return true
}

func (c *catchup) done() bool { return c.remaining == 0 }

// unfinished describes the partitions still short of their end, for an error.
func (c *catchup) unfinished() []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(c.end)) {
		if c.next[p] < c.end[p] {
			out = append(out, fmt.Sprintf("partition %d at offset %d of %d", p, c.next[p], c.end[p]))
		}
	}
	return out
}

// ListOffsets lists the start and end offsets of every partition of topic.
func ListOffsets(ctx context.Context, addr, topic string, partitions int) (starts, ends []int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("inlet-bench-admin"))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	get := func(list func(context.Context, ...string) (kadm.ListedOffsets, error), what string) ([]int64, error) {
		listed, err := list(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("list %s offsets of %q: %w", what, topic, err)
		}
		out := make([]int64, partitions)
		for p := range out {
			o, ok := listed.Lookup(topic, int32(p))
			if !ok {
				return nil, fmt.Errorf("list %s offsets of %q: partition %d missing", what, topic, p)
			}
			out[p] = o.Offset
		}
		return out, nil
	}
	if starts, err = get(adm.ListStartOffsets, "start"); err != nil {
		return nil, nil, err
	}
	if ends, err = get(adm.ListEndOffsets, "end"); err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}
