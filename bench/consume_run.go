package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"inlet/bench/consume"
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
	// base is the origin of every stamp of the phase (consume.StampNanos).
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
	readers, err := consume.StartReaders(ctx, consume.ReaderConfig{
		Addr: srv.Addr(), Topic: s.Topic, Partitions: s.Partitions, Consumers: s.Consumers,
		FetchMaxBytes: s.FetchMaxBytes, FetchMaxPartitionBytes: s.FetchMaxPartitionBytes,
		FetchMinBytes: s.FetchMinBytes, FetchMaxWait: s.FetchMaxWait,
	}, starts, ends, base)
	if err != nil {
		return fail("catch-up: %v", err)
	}
	defer readers.Stop()
	timedOut := readers.WaitCaughtUp(ctx, s.Timeout)
	cpu1, serr := srv.Stats(e.clkTck)
	use1, uerr := proc.ReadUsage(e.clkTck)
	if serr == nil {
		serr = uerr
	}
	if timedOut {
		readers.Stop()
	}
	// Every reader has closed caughtUp (and no longer touches its catch-up fields), or Stop
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
	readers.Stop()
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

	starts, ends, err = consume.ListOffsets(ctx, srv.Addr(), s.Topic, s.Partitions)
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

// catchupFigures sums the readers' catch-up counts, the rates from began to the last record
// read, and lists the partitions not read to their end. The readers must be caught up or
// stopped.
func catchupFigures(readers *consume.Readers, expected uint64, began time.Time) (*CatchupResult, []string) {
	records, bytes, last, unfinished := readers.Catchup()
	cu := &CatchupResult{Expected: expected, Records: records, Bytes: bytes}
	if last.After(began) {
		cu.Seconds = last.Sub(began).Seconds()
		cu.RecordsPerSec = float64(cu.Records) / cu.Seconds
		cu.MBPerSec = float64(cu.Bytes) / 1e6 / cu.Seconds
	}
	return cu, unfinished
}

// readerErrors names the readers' last fetch error, for a failed catch-up's message.
func readerErrors(readers *consume.Readers) string {
	if err := readers.FetchError(); err != nil {
		return fmt.Sprintf("; last fetch error: %v", err)
	}
	return ""
}

// tail produces at s.TailRate for s.TailDuration while readers follow, waits for every
// acknowledged record to be received (at most s.DrainTimeout after sending stops), and
// measures the broker's CPU over that window.
func (e *Env) tail(ctx context.Context, srv *proc.Server, load Load, s ConsumeSettings, base time.Time, readers *consume.Readers) (*TailResult, error) {
	t := &TailResult{OfferedRate: s.TailRate, Errors: map[string]uint64{}}
	cfg := s.producerConfig(load, srv.Addr(), s.TailRate)
	cfg.Producers = s.TailProducers
	producers, err := consume.StartProducers(ctx, cfg, s.Topic, s.RecordSize, load.Idempotent)
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
	producers.Send(ctx, abortCtx, base, start, s.TailRate, s.TailDuration)

	// Acks, then receipt, both within the drain timeout.
	drain := time.Now().Add(s.DrainTimeout)
	flushCtx, cancelFlush := context.WithDeadline(abortCtx, drain)
	producers.Finish(flushCtx)
	cancelFlush()
	t.Sent, t.Acked, t.Failed, t.Unresolved = producers.Totals(t.Errors)
	for readers.Received() < t.Acked && time.Now().Before(drain) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	end := time.Now()
	cpu1, serr := srv.Stats(e.clkTck)
	use1, uerr := proc.ReadUsage(e.clkTck)
	if serr == nil {
		serr = uerr
	}

	var hist loadgen.HistogramSnapshot
	var lastRecv int64
	t.Received, t.Malformed, lastRecv = readers.Tail(&hist)
	first := consume.StampNanos(base, base.Add(start))
	t.Seconds = float64(consume.StampNanos(base, end)-first) / 1e9
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
