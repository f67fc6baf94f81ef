package consume

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/loadgen"
)

// The tail's producers: StartProducers opens their connections before the schedule starts,
// Send produces stamped records on it (open loop: each record's stamp is its intended time),
// Finish waits for the acks, Totals counts them.

// Producers are the tail's producer clients.
type Producers struct {
	ps []*tailProducer
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

// StartProducers creates cfg.Producers clients with cfg's producer settings, sending records
// of recordSize bytes (at least StampSize) to topic, and opens their connections (and, when
// idempotent, gets their producer ids) before the schedule starts.
func StartProducers(ctx context.Context, cfg loadgen.Config, topic string, recordSize int, idempotent bool) (*Producers, error) {
	pad := loadgen.Padding(recordSize)
	var producers []*tailProducer
	closeAll := func() {
		for _, p := range producers {
			p.client.Close()
		}
	}
	for i := range cfg.Producers {
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
		p := &tailProducer{index: uint32(i), client: cl, topic: topic, size: recordSize, pad: pad, errs: map[string]uint64{}}
		p.free.New = func() any {
			b := make([]byte, p.size)
			copy(b[StampSize:], p.pad)
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
			if errs[i] = p.client.EnsureProduceConnectionIsOpen(warmCtx); errs[i] == nil && idempotent {
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
	return &Producers{ps: producers}, nil
}

// Send produces rate records/s over all the producers, on sendCtx, for d or until ctx ends.
// Producer i of n sends record seq at start + (i/n + seq) * n/rate after base (each its own
// slice of one schedule); the stamp is that intended time.
func (ps *Producers) Send(ctx, sendCtx context.Context, base time.Time, start time.Duration, rate float64, d time.Duration) {
	n := len(ps.ps)
	interval := float64(n) / rate * float64(time.Second)
	var stop atomic.Bool
	stopped := make(chan struct{})
	var sending sync.WaitGroup
	for i, p := range ps.ps {
		phase := start + time.Duration(interval*float64(i)/float64(n))
		sending.Go(func() { p.send(sendCtx, base, phase, interval, &stop, stopped) })
	}
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	timer.Stop()
	stop.Store(true)
	close(stopped)
	sending.Wait()
}

// Finish waits for every producer's acks (until ctx ends) and closes the clients.
func (ps *Producers) Finish(ctx context.Context) {
	var flushing sync.WaitGroup
	for _, p := range ps.ps {
		flushing.Go(func() { p.finish(ctx) })
	}
	flushing.Wait()
}

// Totals counts the records sent, acknowledged, failed and left unresolved after Finish, and
// adds the failures by error text into errs.
func (ps *Producers) Totals(errs map[string]uint64) (sent, acked, failed, unresolved uint64) {
	for _, p := range ps.ps {
		sent += p.sent
		acked += p.acked.Load()
		failed += p.failed.Load()
		unresolved += p.unresolved
		p.errorCounts(errs)
	}
	return sent, acked, failed, unresolved
}

// send produces on the open-loop schedule phase + seq*interval (nanoseconds since base) until
// stop is set, paced as loadgen paces (loadgen.Pacer). A producer behind schedule (kgo blocked
// it on a full buffer) sends at once; the delay stays in the latency because the stamp is the
// intended time.
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
