package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/bench/proc"
	"inlet/loadgen"
)

// consume runs the consume phase (consume.go) on srv, whose produce run is over. Problems end
// up in the result's Error; the phases that completed keep their figures.
//
// A target with topic configs (proc.Target.TopicConfigs) has the phase's topic created with
// them; when they make it tiered, the catch-up waits after the fill until every batch of it
// and of the produce run's topic is in the remote tier alone (local log start at the high
// watermark): the read is then one of the remote tier, with no upload running beside it.
func (e *Env) consume(ctx context.Context, srv *proc.Server, target proc.Target, load Load, s ConsumeSettings) *ConsumeRun {
	cr := &ConsumeRun{}
	fail := func(format string, a ...any) *ConsumeRun {
		cr.Error = fmt.Sprintf(format, a...)
		return cr
	}
	// base is the origin of every stamp of the phase (stampNanos).
	base := time.Now()

	// 1. Fill.
	if len(target.TopicConfigs) > 0 {
		if err := createTopic(ctx, srv.Addr(), s.Topic, s.Partitions, target.TopicConfigs); err != nil {
			return fail("fill: %v", err)
		}
	}
	starts, ends, expected, err := e.fill(ctx, srv, load, s, cr)
	if err != nil {
		return fail("%v", err)
	}
	if tiered(target.TopicConfigs) {
		topics := map[string]int{s.Topic: s.Partitions, load.Config("", 0).Topic: load.Partitions}
		waited, err := waitTiered(ctx, srv.Addr(), topics, s.Timeout)
		cr.TierWaitSeconds = waited.Seconds()
		if err != nil {
			return fail("waiting for the remote tier: %v", err)
		}
		fmt.Fprintf(e.Stderr, "bench:        consume: every batch in the remote tier, none on local disk, %.1f s after the fill; catch-up from the remote tier\n", cr.TierWaitSeconds)
	}

	// 2. Catch-up.
	readCtx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	if err := srv.ResetPeakRSS(); err != nil {
		return fail("catch-up: %v", err)
	}
	cpu0, err := srv.Stats(e.clkTck)
	if err != nil {
		return fail("catch-up: reading /proc: %v", err)
	}
	use0, err := proc.ReadUsage(e.clkTck)
	if err != nil {
		return fail("catch-up: reading /proc: %v", err)
	}
	began := time.Now()
	readers, err := startReaders(readCtx, srv.Addr(), s, starts, ends, base)
	if err != nil {
		return fail("catch-up: %v", err)
	}
	stopAll := runReaders(readCtx, stopReaders, readers)
	defer stopAll()
	timedOut := waitCaughtUp(ctx, readers, s.Timeout)
	cpu1, serr := srv.Stats(e.clkTck)
	use1, uerr := proc.ReadUsage(e.clkTck)
	if serr == nil {
		serr = uerr
	}
	if timedOut {
		stopAll()
	}
	// Every reader has closed caughtUp (and no longer touches its catch-up fields), or stopAll
	// has returned.
	cu, unfinished := catchupFigures(readers, expected, began)
	if serr == nil {
		cu.ServerCPUSeconds = cpu1.CPUSeconds - cpu0.CPUSeconds
		cu.ServerPeakRSSBytes = cpu1.PeakRSSBytes
		w := use1.Sub(use0)
		cu.ClientCPUSeconds, cu.MachineBusy, cu.MachineSteal = w.SelfSeconds, w.BusyShare(), w.StealShare()
		if cu.ServerCPUSeconds > 0 {
			cu.RecordsPerCPUSecond = float64(cu.Records) / cu.ServerCPUSeconds
		}
	}
	cr.Catchup = cu
	switch {
	case ctx.Err() != nil:
		return fail("catch-up: interrupted")
	case timedOut:
		if len(unfinished) > 5 {
			unfinished = append(unfinished[:5], fmt.Sprintf("and %d more", len(unfinished)-5))
		}
		return fail("catch-up: %d of %d records read in %v; unfinished: %s%s", cu.Records, expected, s.Timeout,
			strings.Join(unfinished, ", "), readerErrors(readers))
	case serr != nil:
		return fail("catch-up: reading /proc: %v", serr)
	case cu.Records != expected:
		return fail("catch-up: read %d records, but the offsets span %d", cu.Records, expected)
	}

	// 3. Tail: the consumers are at the end of every partition.
	t, err := e.tail(ctx, srv, load, s, base, readers)
	stopAll()
	cr.Tail = t
	if err != nil {
		return fail("tail: %v", err)
	}
	if err := t.check(); err != nil {
		return fail("tail: %v", err)
	}
	return cr
}

// fill writes the phase's records flat out, bounded by Timeout (loadgen still waits up to its
// flush timeout for acks), into cr.Fill, and lists the offsets the catch-up reads up to: every
// fill record is acknowledged, so nothing more arrives. expected is the records between them.
func (e *Env) fill(ctx context.Context, srv *proc.Server, load Load, s ConsumeSettings, cr *ConsumeRun) (starts, ends []int64, expected uint64, err error) {
	cfg := s.producerConfig(load, srv.Addr(), 0)
	cfg.Records = s.FillRecords
	cfg.Live = e.Live
	fillCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	res, err := loadgen.Run(fillCtx, cfg)
	cancel()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fill: %v", err)
	}
	cr.Fill = &FillResult{Acked: res.Acked, Failed: res.Failed, Seconds: res.Elapsed.Seconds(), RecordsPerSec: res.RecordsPerSec}
	if len(res.Errors) > 0 {
		cr.Fill.Errors = res.Errors
	}
	if err := fillCheck(res, s.FillRecords); err != nil {
		return nil, nil, 0, fmt.Errorf("fill: %v", err)
	}

	starts, ends, err = listOffsets(ctx, srv.Addr(), s.Topic, s.Partitions)
	if err != nil {
		return nil, nil, 0, err
	}
	for p := range ends {
		expected += uint64(max(ends[p]-starts[p], 0))
	}
	if expected < cr.Fill.Acked {
		return nil, nil, 0, fmt.Errorf("after the fill the partitions hold %d records by their offsets, fewer than the %d acknowledged", expected, cr.Fill.Acked)
	}
	return starts, ends, expected, nil
}

// runReaders starts each reader's goroutine and returns stopAll, which ends them (through
// stopReaders, the cancel of their context) and closes their clients; after it the readers'
// catch-up fields may be read whatever state they were left in. stopAll runs once.
func runReaders(readCtx context.Context, stopReaders func(), readers []*reader) (stopAll func()) {
	var exited sync.WaitGroup
	for _, r := range readers {
		exited.Go(func() { r.run(readCtx) })
	}
	return sync.OnceFunc(func() {
		stopReaders()
		exited.Wait()
		for _, r := range readers {
			r.client.Close()
		}
	})
}

// waitCaughtUp waits until every reader has caught up; true when timeout passed first or ctx
// ended.
func waitCaughtUp(ctx context.Context, readers []*reader, timeout time.Duration) (timedOut bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, r := range readers {
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

// catchupFigures sums the readers' catch-up counts, the rates from began to the last record
// read, and lists the partitions not read to their end. The readers must be caught up or
// stopped.
func catchupFigures(readers []*reader, expected uint64, began time.Time) (*CatchupResult, []string) {
	cu := &CatchupResult{Expected: expected}
	var last time.Time
	var unfinished []string
	for _, r := range readers {
		cu.Records += r.cu.records
		cu.Bytes += r.cu.bytes
		if r.last.After(last) {
			last = r.last
		}
		unfinished = append(unfinished, r.cu.unfinished()...)
	}
	if last.After(began) {
		cu.Seconds = last.Sub(began).Seconds()
		cu.RecordsPerSec = float64(cu.Records) / cu.Seconds
		cu.MBPerSec = float64(cu.Bytes) / 1e6 / cu.Seconds
	}
	return cu, unfinished
}

// listOffsets lists the start and end offsets of every partition of topic.
func listOffsets(ctx context.Context, addr, topic string, partitions int) (starts, ends []int64, err error) {
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

func startReaders(ctx context.Context, addr string, s ConsumeSettings, starts, ends []int64, base time.Time) ([]*reader, error) {
	var readers []*reader
	for i, parts := range splitPartitions(s.Partitions, s.Consumers) {
		offsets := map[int32]kgo.Offset{}
		for _, p := range parts {
			offsets[p] = kgo.NewOffset().At(starts[p])
		}
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(addr),
			kgo.ClientID(fmt.Sprintf("inlet-bench-consumer-%d", i)),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.Topic: offsets}),
			kgo.FetchMaxBytes(s.FetchMaxBytes),
			kgo.FetchMaxPartitionBytes(s.FetchMaxPartitionBytes),
			kgo.FetchMinBytes(s.FetchMinBytes),
			kgo.FetchMaxWait(s.FetchMaxWait),
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
	return readers, nil
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
		recv := stampNanos(r.base, now)
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

func readerErrors(readers []*reader) string {
	for _, r := range readers {
		if r.lastErr != nil {
			return fmt.Sprintf("; last fetch error: %v", r.lastErr)
		}
	}
	return ""
}

// tail produces at s.TailRate for s.TailDuration while readers follow, waits for every
// acknowledged record to be received (at most s.DrainTimeout after sending stops), and
// measures the broker's CPU over that window.
func (e *Env) tail(ctx context.Context, srv *proc.Server, load Load, s ConsumeSettings, base time.Time, readers []*reader) (*TailResult, error) {
	t := &TailResult{OfferedRate: s.TailRate, Errors: map[string]uint64{}}
	producers, err := startTailProducers(ctx, srv.Addr(), load, s)
	if err != nil {
		return t, err
	}
	abortCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()

	if err := srv.ResetPeakRSS(); err != nil {
		return t, err
	}
	cpu0, err := srv.Stats(e.clkTck)
	if err != nil {
		return t, fmt.Errorf("reading /proc: %v", err)
	}
	use0, err := proc.ReadUsage(e.clkTck)
	if err != nil {
		return t, fmt.Errorf("reading /proc: %v", err)
	}
	// The schedule starts a little ahead, so that the first records are not already late.
	start := time.Since(base) + time.Millisecond
	interval := float64(len(producers)) / s.TailRate * float64(time.Second)
	var stop atomic.Bool
	stopped := make(chan struct{})
	var sending sync.WaitGroup
	for i, p := range producers {
		phase := start + time.Duration(interval*float64(i)/float64(len(producers)))
		sending.Go(func() { p.send(abortCtx, base, phase, interval, &stop, stopped) })
	}
	timer := time.NewTimer(s.TailDuration)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	timer.Stop()
	stop.Store(true)
	close(stopped)
	sending.Wait()

	// Acks, then receipt, both within the drain timeout.
	drain := time.Now().Add(s.DrainTimeout)
	flushCtx, cancelFlush := context.WithDeadline(abortCtx, drain)
	var flushing sync.WaitGroup
	for _, p := range producers {
		flushing.Go(func() { p.finish(flushCtx) })
	}
	flushing.Wait()
	cancelFlush()
	for _, p := range producers {
		t.Sent += p.sent
		t.Acked += p.acked.Load()
		t.Failed += p.failed.Load()
		t.Unresolved += p.unresolved
		p.errorCounts(t.Errors)
	}
	received := func() uint64 {
		var n uint64
		for _, r := range readers {
			n += r.received.Load()
		}
		return n
	}
	for received() < t.Acked && time.Now().Before(drain) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	end := time.Now()
	cpu1, serr := srv.Stats(e.clkTck)
	use1, uerr := proc.ReadUsage(e.clkTck)
	if serr == nil {
		serr = uerr
	}

	var hist, one loadgen.HistogramSnapshot
	var lastRecv int64
	for _, r := range readers {
		t.Received += r.received.Load()
		t.Malformed += r.malformed.Load()
		lastRecv = max(lastRecv, r.lastRecv.Load())
		r.e2e.Snapshot(&one)
		hist.Merge(&one)
	}
	first := stampNanos(base, base.Add(start))
	t.Seconds = float64(stampNanos(base, end)-first) / 1e9
	if lastRecv > first {
		t.RecordsPerSec = float64(t.Received) / (float64(lastRecv-first) / 1e9)
	}
	t.E2E, t.E2EHistogram = summarizeLatency(&hist), hist.Buckets()
	if len(t.Errors) == 0 {
		t.Errors = nil
	}
	if serr != nil {
		return t, fmt.Errorf("reading /proc: %v", serr)
	}
	t.ServerCPUSeconds = cpu1.CPUSeconds - cpu0.CPUSeconds
	t.ServerPeakRSSBytes = cpu1.PeakRSSBytes
	if t.Seconds > 0 {
		t.ServerCPUCores = t.ServerCPUSeconds / t.Seconds
	}
	w := use1.Sub(use0)
	t.ClientCPUSeconds, t.MachineBusy, t.MachineSteal = w.SelfSeconds, w.BusyShare(), w.StealShare()
	if ctx.Err() != nil {
		return t, errors.New("interrupted")
	}
	return t, nil
}

// tailProducer is one kgo client of the tail, with loadgen's producer settings. Its lifecycle
// (send, then finish) runs on one goroutine; kgo's promise goroutine calls onResult.
type tailProducer struct {
	index  uint32
	client *kgo.Client
	topic  string
	size   int
	pad    []byte

	sent       uint64 // owned by the lifecycle goroutine
	unresolved uint64
	acked      atomic.Uint64
	failed     atomic.Uint64

	errMu sync.Mutex
	errs  map[string]uint64

	free    sync.Pool // *tailRecord, recycled after their promise
	promise func(*kgo.Record, error)
}

// tailRecord carries itself to the promise as the record's Context (a context whose Done is
// nil, which kgo never treats as cancelled; loadgen's sentRecord does the same).
type tailRecord struct {
	rec kgo.Record
	buf []byte
}

func (*tailRecord) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*tailRecord) Done() <-chan struct{}       { return nil }
func (*tailRecord) Err() error                  { return nil }
func (*tailRecord) Value(any) any               { return nil }

// startTailProducers creates the tail's clients and opens their connections (and gets their
// producer ids) before the schedule starts.
func startTailProducers(ctx context.Context, addr string, load Load, s ConsumeSettings) ([]*tailProducer, error) {
	cfg := s.producerConfig(load, addr, s.TailRate)
	cfg.Producers = s.TailProducers
	pad := loadgen.Padding(s.RecordSize)
	var producers []*tailProducer
	closeAll := func() {
		for _, p := range producers {
			p.client.Close()
		}
	}
	for i := range s.TailProducers {
		opts, err := cfg.ProducerOpts(i)
		if err != nil {
			closeAll()
			return nil, err
		}
		cl, err := kgo.NewClient(append(opts, kgo.ClientID(fmt.Sprintf("inlet-bench-tail-%d", i)))...)
		if err != nil {
			closeAll()
			return nil, err
		}
		p := &tailProducer{index: uint32(i), client: cl, topic: s.Topic, size: s.RecordSize, pad: pad, errs: map[string]uint64{}}
		p.free.New = func() any {
			b := make([]byte, p.size)
			copy(b[stampSize:], p.pad)
			return &tailRecord{buf: b}
		}
		p.promise = p.onResult
		producers = append(producers, p)
	}
	warmCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	errs := make([]error, len(producers))
	var wg sync.WaitGroup
	for i, p := range producers {
		wg.Go(func() {
			if errs[i] = p.client.EnsureProduceConnectionIsOpen(warmCtx); errs[i] == nil && load.Idempotent {
				_, _, errs[i] = p.client.ProducerID(warmCtx)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("start tail producer %d: %w", i, err)
		}
	}
	return producers, nil
}

// send produces on the open-loop schedule phase + seq*interval (nanoseconds since base) until
// stop is set, paced as loadgen paces (loadgen.Pacer). A producer behind schedule (kgo blocked it on a full buffer) sends at once; the
// delay stays in the latency because the stamp is the intended time.
func (p *tailProducer) send(ctx context.Context, base time.Time, phase time.Duration, interval float64, stop *atomic.Bool, stopped <-chan struct{}) {
	pacer := loadgen.Pacer{Start: base}
	defer pacer.Stop()
	baseNanos := base.UnixNano()
	seq := uint64(0)
	for ; !stop.Load(); seq++ {
		intended := phase + time.Duration(float64(seq)*interval)
		if !pacer.Wait(intended, stopped) {
			p.sent = seq
			return
		}
		tr := p.free.Get().(*tailRecord)
		putStamp(tr.buf, baseNanos+int64(intended), p.index, seq)
		tr.rec = kgo.Record{Topic: p.topic, Value: tr.buf, Context: tr}
		p.client.Produce(ctx, &tr.rec, p.promise)
	}
	p.sent = seq
}

func (p *tailProducer) onResult(r *kgo.Record, err error) {
	if err != nil {
		p.errMu.Lock()
		p.errs[err.Error()]++
		p.errMu.Unlock()
		p.failed.Add(1)
	} else {
		p.acked.Add(1)
	}
	p.free.Put(r.Context.(*tailRecord))
}

// finish waits for the acks (until ctx ends), closes the client and gives the promises that
// Close fails a moment to run.
func (p *tailProducer) finish(ctx context.Context) {
	_ = p.client.Flush(ctx)
	p.client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for p.acked.Load()+p.failed.Load() < p.sent && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if done := p.acked.Load() + p.failed.Load(); done < p.sent {
		p.unresolved = p.sent - done
	}
}

func (p *tailProducer) errorCounts(into map[string]uint64) {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	for k, n := range p.errs {
		into[k] += n
	}
}
