package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// producer is one kgo client sending records with dense sequence numbers. Its lifecycle runs on
// one goroutine (send, then finish); kgo's promise goroutine for the client calls onResult.
type producer struct {
	index  uint32
	client *kgo.Client
	topic  string
	// topics, when a run has several (Config.Topics), replace topic: record n goes to
	// topics[(index+n) mod len(topics)], so the producers start on different topics.
	topics []string
	start  time.Time // the run's start; latencies and intended send times are relative to it

	// interval is the time between intended sends in nanoseconds, 0 for flat out; phase offsets
	// this producer's schedule so that producers do not all send at the same instant.
	interval float64
	phase    time.Duration
	quota    uint64 // records to send at most

	sent      uint64 // sequence numbers 0..sent-1 were handed to kgo; owned by the lifecycle goroutine
	acked     atomic.Uint64
	failed    atomic.Uint64
	ackedSeqs *Bitmap
	latency   Histogram
	// roundTrip is the time from writing each produce request to reading its response, as
	// kgo's HookBrokerE2E reports it: the broker's share of the ack latency (with the network
	// and the client's reading), without the linger and the client's queueing.
	roundTrip Histogram

	errMu sync.Mutex
	errs  map[string]uint64

	flushedAt  time.Duration // since start: when Flush returned, i.e. the last ack or the abort
	unresolved uint64        // sent records whose promise never came, even after Close

	vals *values // writes each record's value into a recycled buffer

	// txn is the transaction state of a transactional producer (txn.go), nil otherwise.
	txn *txnState

	// free recycles sentRecords once kgo is done with them (after their promise), so that a
	// flat-out run does not allocate a record and a value per send.
	free    sync.Pool
	promise func(*kgo.Record, error) // onResult, bound once so Produce does not allocate it
}

// pacingQuantum is the shortest sleep of an open-loop producer (see Pacer).
const pacingQuantum = 200 * time.Microsecond

// Pacer holds an open-loop sender to its schedule: Wait sleeps while the sender is ahead of a
// record's intended send time (measured from Start), and not at all when it is behind (kgo
// blocked it, or a sleep overshot), so the delay stays in the latency of the late records,
// which is measured from the intended time.
//
// A sleep per record (every 23 µs per producer at 700k records/s) cost the load generator
// about 0.35 µs more CPU per record in timer wake-ups (scripts/loadgen-cpu-ab.sh), CPU the
// broker shares on a small machine. Sleeping at least pacingQuantum sends the records that
// fell due meanwhile together; each is late by at most the quantum, and that lateness is
// counted in its latency.
type Pacer struct {
	Start time.Time
	timer *time.Timer
}

// Wait sleeps until intended after Start if that is ahead; false: stopped was closed first.
func (p *Pacer) Wait(intended time.Duration, stopped <-chan struct{}) bool {
	wait := intended - time.Since(p.Start)
	if wait <= 0 {
		return true
	}
	wait = max(wait, pacingQuantum)
	if p.timer == nil {
		p.timer = time.NewTimer(wait)
	} else {
		p.timer.Reset(wait)
	}
	select {
	case <-p.timer.C:
		return true
	case <-stopped:
		return false
	}
}

// Stop releases the pacer's timer.
func (p *Pacer) Stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// sentRecord is a kgo.Record with what onResult needs to account for it. It reaches onResult as
// the record's Context, which kgo carries untouched: a context whose Done is nil is never
// treated as a cancellation signal (kgo's promisedRec.cancelingCtx), and Record.Timestamp cannot
// carry the send time because kgo truncates it to milliseconds.
type sentRecord struct {
	rec      kgo.Record
	buf      []byte
	seq      uint64
	intended time.Duration // since start
}

func (*sentRecord) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*sentRecord) Done() <-chan struct{}       { return nil }
func (*sentRecord) Err() error                  { return nil }
func (*sentRecord) Value(any) any               { return nil }

func newProducer(index uint32, client *kgo.Client, topic string, vals *values, quota uint64) *producer {
	p := &producer{
		index:     index,
		client:    client,
		topic:     topic,
		quota:     min(quota, BitmapCapacity),
		ackedSeqs: NewBitmap(),
		errs:      make(map[string]uint64),
		vals:      vals,
	}
	p.free.New = func() any { return &sentRecord{buf: vals.buffer()} }
	p.promise = p.onResult
	return p
}

// send produces records until the quota is reached or stop is set. Produce blocks while the
// client holds MaxBufferedRecords unacknowledged records: that is the flow control of a
// flat-out run. ctx is the Produce context: cancelling it (the run's abort) fails what kgo has
// not sent yet and unblocks a Produce waiting for buffer space.
//
// A transactional producer begins a transaction before a record when none is open and ends it
// (flush, commit or abort) after TxnRecords records; the transaction still open when sending
// stops is ended by finish.
func (p *producer) send(ctx context.Context, stop *atomic.Bool, stopped <-chan struct{}) {
	pacer := Pacer{Start: p.start}
	defer pacer.Stop()
	seq := uint64(0)
	for ; seq < p.quota && !stop.Load(); seq++ {
		var intended time.Duration
		if p.interval > 0 {
			intended = p.phase + time.Duration(float64(seq)*p.interval)
			if !pacer.Wait(intended, stopped) {
				p.sent = seq
				return
			}
		} else {
			// Flat out there is no schedule; the clock starts before Produce, so time spent
			// blocked on a full buffer counts.
			intended = time.Since(p.start)
		}
		if p.txn != nil && !p.txn.open && !p.txnBegin(ctx, seq) {
			break
		}
		sr := p.free.Get().(*sentRecord)
		sr.buf = p.vals.put(sr.buf, p.index, seq)
		sr.seq = seq
		sr.intended = intended
		sr.rec = kgo.Record{Topic: p.topicOf(seq), Value: sr.buf, Context: sr}
		p.client.Produce(ctx, &sr.rec, p.promise)
		if p.txn != nil && p.txnDue(seq) {
			p.txnEnd(ctx, seq+1)
		}
	}
	p.sent = seq
}

// topicOf is the topic of record seq: the topic, or with several topics[(index+seq) mod n].
func (p *producer) topicOf(seq uint64) string {
	if n := uint64(len(p.topics)); n > 1 {
		return p.topics[(uint64(p.index)+seq)%n]
	}
	return p.topic
}

// roundTripHook records produce request round trips into the producer's histogram.
type roundTripHook struct{ p *producer }

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h roundTripHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != 0 || e2e.Err() != nil { // 0: Produce
		return
	}
	h.p.roundTrip.Record(uint64(e2e.DurationE2E() / time.Microsecond))
}

// onResult is the promise of every record. kgo calls it serially per client, after which the
// record is no longer kgo's. The acked bit is set before the counter is incremented: readers
// that see the counter see the bit.
func (p *producer) onResult(r *kgo.Record, err error) {
	sr := r.Context.(*sentRecord)
	if err != nil {
		p.errMu.Lock()
		p.errs[err.Error()]++
		p.errMu.Unlock()
		p.failed.Add(1)
	} else {
		latency := max(time.Since(p.start)-sr.intended, 0)
		p.latency.Record(uint64(latency / time.Microsecond))
		p.ackedSeqs.Set(sr.seq)
		p.acked.Add(1)
	}
	p.free.Put(sr)
}

// finish waits for every sent record's ack, then closes the client. Flush returns early only if
// ctx is cancelled (the run's flush timeout); Close then fails whatever kgo still holds. A
// transactional producer first ends its open transaction.
func (p *producer) finish(ctx context.Context) {
	if p.txn != nil {
		p.txnEnd(ctx, p.sent)
	}
	_ = p.client.Flush(ctx) // an error is the abort, already recorded by Run
	p.flushedAt = time.Since(p.start)
	p.client.Close()
	// After an abort Close fails the leftover records, but their promises run on kgo's promise
	// goroutine and may trail Close: give them a moment so the counts add up.
	deadline := time.Now().Add(promiseDrainTimeout)
	for p.acked.Load()+p.failed.Load() < p.sent && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if done := p.acked.Load() + p.failed.Load(); done < p.sent {
		p.unresolved = p.sent - done
	}
}

const promiseDrainTimeout = 10 * time.Second

// errorCounts copies the error counts.
func (p *producer) errorCounts(into map[string]uint64) {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	for k, n := range p.errs {
		into[k] += n
	}
}
