// Package loadgen reproduces "16 producers sending flat out" against a Kafka-compatible broker
// with franz-go (kgo), measures throughput and ack latency, and checks exactly-once (idempotent
// producers) or at-least-once (plain producers) delivery by reading every record back.
//
// Every record value names its producer and a per-producer sequence number (value.go, or
// avro.go: an Avro record in Confluent wire format, which a validating broker accepts); acks
// set bits in per-producer bitmaps (bitmap.go) and latencies go into lock-free log-linear
// histograms (histogram.go); verification replays the topic into a pure Verifier (verify.go).
package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// warmupTimeout bounds connecting the producers (and getting their producer ids) before the
// clock starts.
const warmupTimeout = 30 * time.Second

// Result is the outcome of Run. Latencies are in microseconds; MB is 10^6 bytes of record
// values (keys are nil; batch and request framing is not counted).
type Result struct {
	Settings Settings `json:"settings"`
	// Topic says how the topic was found: "created" (by this run's CreateTopics), "existing",
	// or, when the broker refused CreateTopics, "auto-created or existing" and why.
	Topic string    `json:"topic"`
	Start time.Time `json:"start"`
	// Elapsed runs from the first send to the last ack (or the abort); SendElapsed to the
	// moment sending stopped. Rates are over Elapsed.
	Elapsed     time.Duration `json:"elapsed_ns"`
	SendElapsed time.Duration `json:"send_elapsed_ns"`

	Sent   uint64 `json:"sent"`
	Acked  uint64 `json:"acked"`
	Failed uint64 `json:"failed"`
	// Unresolved records were sent but neither acked nor failed, even after the clients closed:
	// a client bug or a stuck promise, never expected.
	Unresolved uint64 `json:"unresolved"`
	Bytes      uint64 `json:"bytes"`

	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`

	Latency          LatencySummary    `json:"latency"`
	LatencyHistogram []HistogramBucket `json:"latency_histogram,omitempty"`
	// RequestRoundTrip is per produce request, from writing it to reading its response
	// (kgo's BrokerE2E.DurationE2E): the broker's share of Latency, network and the client's
	// reading included, linger and client-side queueing not.
	RequestRoundTrip LatencySummary `json:"request_round_trip"`

	// Errors counts failed records by error text.
	Errors    map[string]uint64 `json:"errors"`
	Producers []ProducerResult  `json:"producers"`

	// Transactions counts the transactions of a transactional run (nil otherwise). Failed
	// records are expected in such a run: each one's transaction is aborted.
	Transactions *TxnSummary `json:"transactions,omitempty"`

	// FlushTimedOut: acks were still outstanding FlushTimeout after sending stopped; the
	// clients were closed and what they held failed.
	FlushTimedOut bool `json:"flush_timed_out"`
	// Interrupted: ctx ended the run; verification is skipped then.
	Interrupted bool `json:"interrupted"`

	Verify *VerifyResult `json:"verify,omitempty"`
}

// LatencySummary is the ack latency of acknowledged records, from the intended send time (with
// Rate) or the Produce call (flat out) to the promise.
type LatencySummary struct {
	Count  uint64  `json:"count"`
	MeanUs float64 `json:"mean_us"`
	P50Us  uint64  `json:"p50_us"`
	P90Us  uint64  `json:"p90_us"`
	P99Us  uint64  `json:"p99_us"`
	P999Us uint64  `json:"p999_us"`
	MaxUs  uint64  `json:"max_us"`
}

func summarize(h *HistogramSnapshot) LatencySummary {
	return LatencySummary{
		Count:  h.Total,
		MeanUs: h.Mean(),
		P50Us:  h.Quantile(0.50),
		P90Us:  h.Quantile(0.90),
		P99Us:  h.Quantile(0.99),
		P999Us: h.Quantile(0.999),
		MaxUs:  h.Max,
	}
}

// ProducerResult is one producer's share.
type ProducerResult struct {
	Producer   int    `json:"producer"`
	Sent       uint64 `json:"sent"`
	Acked      uint64 `json:"acked"`
	Failed     uint64 `json:"failed"`
	Unresolved uint64 `json:"unresolved"`
	// Transactional runs: the producer's transactional id and transactions by outcome.
	TransactionalID string `json:"transactional_id,omitempty"`
	TxnCommitted    uint64 `json:"txn_committed,omitempty"`
	TxnAborted      uint64 `json:"txn_aborted,omitempty"`
	TxnInDoubt      uint64 `json:"txn_in_doubt,omitempty"`
	// TxnBroken: the producer stopped sending early because it could neither end nor begin a
	// transaction, even with a new client, for txnControlTimeout.
	TxnBroken bool `json:"txn_broken,omitempty"`
}

// Run creates the topic if needed, runs the producers until Duration, Records or ctx ends the
// run, waits for the acks, and verifies when asked. An error means the run could not start
// (bad config, broker unreachable); problems during the run are in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if cfg.Transactional && cfg.TxnRunID == "" {
		cfg.TxnRunID = newRunID()
	}
	res := &Result{Settings: cfg.settings(), Errors: make(map[string]uint64)}

	admin, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("inlet-loadgen-admin"))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)

	var partitions int
	var how string
	if cfg.Topics > 1 {
		names := cfg.TopicNames()
		partitions, how, err = ensureTopics(ctx, admin, names, cfg.Partitions)
		if err == nil && cfg.Live != nil {
			fmt.Fprintf(cfg.Live, "%d topics %q..%q: %d partitions each (%s)\n", len(names), names[0], names[len(names)-1], partitions, how)
		}
	} else {
		partitions, how, err = ensureTopic(ctx, admin, cfg.Topic, cfg.Partitions)
		if err == nil && cfg.Live != nil {
			fmt.Fprintf(cfg.Live, "topic %q: %d partitions (%s)\n", cfg.Topic, partitions, how)
		}
	}
	if err != nil {
		return nil, err
	}
	res.Settings.Partitions, res.Topic = partitions, how
	// Verification reads from where this run starts: the topic may hold earlier runs.
	var startOffsets []int64
	if cfg.Verify {
		if startOffsets, err = endOffsets(ctx, adm, cfg.Topic, partitions); err != nil {
			return nil, err
		}
	}

	producers, err := startProducers(ctx, cfg)
	if err != nil {
		return nil, err
	}
	runProducers(ctx, cfg, producers, res)
	collect(cfg, producers, res)

	if cfg.Verify && !res.Interrupted {
		res.Verify = verify(ctx, cfg, adm, startOffsets, producers)
	}
	return res, nil
}

// newRunID returns 8 random hex digits: each run's transactional ids are its own.
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// startProducers creates one client per producer and opens its produce connection (and, for
// idempotent producers, gets its producer id) so that setup is not timed as ack latency.
func startProducers(ctx context.Context, cfg Config) ([]*producer, error) {
	producers := make([]*producer, cfg.Producers)
	closeAll := func() {
		for _, p := range producers {
			if p != nil {
				p.client.Close()
			}
		}
	}
	vals := newValues(cfg.ValueFormat, cfg.RecordSize, cfg.SchemaID)
	var topics []string
	if cfg.Topics > 1 {
		topics = cfg.TopicNames() // shared, read only
	}
	// Records is spread evenly, the first Records%Producers producers taking one more.
	for i := range producers {
		quota := uint64(BitmapCapacity)
		if cfg.Records > 0 {
			quota = uint64(cfg.Records / int64(cfg.Producers))
			if int64(i) < cfg.Records%int64(cfg.Producers) {
				quota++
			}
		}
		// The hook is bound before the client exists: kgo takes hooks as options.
		p := newProducer(uint32(i), nil, cfg.Topic, vals, quota)
		p.topics = topics
		opts := append(cfg.producerOpts(i), kgo.WithHooks(roundTripHook{p}))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			closeAll()
			return nil, err
		}
		p.client = cl
		if cfg.Transactional {
			// The options are kept to recreate the client after a fatal error (txn.go).
			p.txn = &txnState{records: uint64(cfg.TxnRecords), abortFraction: cfg.TxnAbortFraction, opts: opts}
		}
		producers[i] = p
	}

	warmCtx, cancel := context.WithTimeout(ctx, warmupTimeout)
	defer cancel()
	errs := make([]error, len(producers))
	var wg sync.WaitGroup
	for i, p := range producers {
		wg.Go(func() {
			if err := p.client.EnsureProduceConnectionIsOpen(warmCtx); err != nil {
				errs[i] = err
				return
			}
			if cfg.Idempotent {
				// For a transactional producer this is InitProducerId with its
				// transactional id.
				_, _, errs[i] = p.client.ProducerID(warmCtx)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("start producer %d: %w", i, err)
		}
	}
	return producers, nil
}

// runProducers runs the send and finish phases of every producer and the live line.
//
// Stopping: Duration, ctx or every producer reaching its quota sets stop; each producer then
// flushes (waits for its acks) and closes its client. If acks are still outstanding
// FlushTimeout after the stop, abort is cancelled: it is every Produce's context, so records
// kgo has not sent fail, a Produce blocked on a full buffer returns, Flush returns, and Close
// fails the rest. The abort context does not derive from ctx: cancelling ctx stops sending but
// still waits for acks, so an interrupted run's counts stay exact.
func runProducers(ctx context.Context, cfg Config, producers []*producer, res *Result) {
	abortCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	var stop atomic.Bool
	stopped := make(chan struct{})

	start := time.Now()
	res.Start = start
	// With a rate, producer i's record n is due at phase_i + n*interval: each producer carries
	// Rate/Producers records a second, and the phases spread the producers' sends evenly.
	var interval float64
	if cfg.Rate > 0 {
		interval = float64(cfg.Producers) / cfg.Rate * float64(time.Second)
	}
	var sending, finished sync.WaitGroup
	for i, p := range producers {
		p.start = start
		p.interval = interval
		p.phase = time.Duration(interval * float64(i) / float64(len(producers)))
		sending.Add(1)
		finished.Go(func() {
			p.send(abortCtx, &stop, stopped)
			sending.Done()
			p.finish(abortCtx)
		})
	}
	allSent := make(chan struct{})
	go func() { sending.Wait(); close(allSent) }()
	allFinished := make(chan struct{})
	go func() { finished.Wait(); close(allFinished) }()

	liveDone := make(chan struct{})
	var liveWG sync.WaitGroup
	if cfg.Live != nil {
		liveWG.Go(func() { writeLive(cfg.Live, cfg.RecordSize, start, producers, liveDone) })
	}

	var durationC <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		durationC = t.C
	}
	select {
	case <-ctx.Done():
		res.Interrupted = true
	case <-durationC:
	case <-allSent:
	}
	stop.Store(true)
	close(stopped)
	// Producers notice the stop within one record (or one Produce blocked on a full buffer).
	res.SendElapsed = time.Since(start)

	flushTimer := time.NewTimer(cfg.FlushTimeout)
	defer flushTimer.Stop()
	select {
	case <-allFinished:
	case <-flushTimer.C:
		res.FlushTimedOut = true
		abort()
		<-allFinished
	}
	close(liveDone)
	liveWG.Wait()
}

// collect sums the producers' counts into res. It runs after every producer finished.
func collect(cfg Config, producers []*producer, res *Result) {
	var hist, rtt, one HistogramSnapshot
	if cfg.Transactional {
		res.Transactions = &TxnSummary{}
	}
	for i, p := range producers {
		pr := ProducerResult{Producer: i, Sent: p.sent, Acked: p.acked.Load(), Failed: p.failed.Load(),
			Unresolved: p.unresolved}
		if t := p.txn; t != nil {
			pr.TransactionalID = cfg.TransactionalID(i)
			pr.TxnCommitted, pr.TxnAborted, pr.TxnInDoubt = t.summary.Committed, t.summary.Aborted, t.summary.InDoubt
			pr.TxnBroken = t.broken
			res.Transactions.add(&t.summary)
		}
		res.Producers = append(res.Producers, pr)
		res.Sent += pr.Sent
		res.Acked += pr.Acked
		res.Failed += pr.Failed
		res.Unresolved += pr.Unresolved
		res.Elapsed = max(res.Elapsed, p.flushedAt)
		p.errorCounts(res.Errors)
		p.latency.Snapshot(&one)
		hist.Merge(&one)
		p.roundTrip.Snapshot(&one)
		rtt.Merge(&one)
	}
	res.Bytes = res.Acked * uint64(cfg.RecordSize)
	if secs := res.Elapsed.Seconds(); secs > 0 {
		res.RecordsPerSec = float64(res.Acked) / secs
		res.MBPerSec = float64(res.Bytes) / 1e6 / secs
	}
	res.Latency = summarize(&hist)
	res.LatencyHistogram = hist.Buckets()
	res.RequestRoundTrip = summarize(&rtt)
}

// verify reads back everything written since startOffsets and checks it against the acks
// (and, in a transactional run, the transactions' outcomes). It reads with read_committed.
func verify(ctx context.Context, cfg Config, adm *kadm.Client, startOffsets []int64, producers []*producer) *VerifyResult {
	began := time.Now()
	sent := make([]uint64, len(producers))
	acked := make([]*Bitmap, len(producers))
	for i, p := range producers {
		sent[i], acked[i] = p.sent, p.ackedSeqs
	}
	dec := NewDecoder(cfg.ValueFormat, cfg.RecordSize, cfg.SchemaID)
	var v *Verifier
	if cfg.Transactional {
		logs := make([]TxnLog, len(producers))
		for i, p := range producers {
			logs[i] = p.txn.log
		}
		v = NewTxnVerifier(dec, len(startOffsets), sent, acked, logs)
	} else {
		v = NewVerifier(cfg.Idempotent, dec, len(startOffsets), sent, acked)
	}

	var ranges []PartitionRange
	ends, err := endOffsets(ctx, adm, cfg.Topic, len(startOffsets))
	if err == nil {
		for p, start := range startOffsets {
			ranges = append(ranges, PartitionRange{Partition: int32(p), Start: start, End: ends[p]})
		}
		err = readBack(ctx, cfg.Brokers, cfg.Topic, ranges, v.Observe)
	}
	r := v.Result()
	r.Ranges = ranges
	if err != nil {
		r.OK = false
		r.Error = err.Error()
	}
	r.Duration = time.Since(began)
	return &r
}
