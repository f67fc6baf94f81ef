package batchlog_test

// The power-loss test: the log runs on file systems that keep only what was synced when they
// "crash" (segfs.MemFS under the segment files, Pebble's crashable vfs.MemFS under Pebble,
// both cut at one instant), under idempotent producers that retry after every restart as
// Kafka clients do. After each crash it checks the recovery invariant from the outside:
// every acknowledged batch is present exactly once at the offset it was acknowledged with,
// the high watermark points at the end of the data, and a retried batch is answered as a
// duplicate exactly when it survived.

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	. "inlet/batchlog"
	"inlet/segfs"
	"inlet/wire"
)

var (
	powerLossSeed    = flag.Uint64("powerloss.seed", 0, "seed of TestPowerLoss (0: from the clock)")
	powerLossCrashes = flag.Int("powerloss.crashes", 200, "crash points per layout in TestPowerLoss")
)

const (
	// powerLossDiskLife is how many crashes one file system goes through before the test
	// starts on a fresh one.
	powerLossDiskLife = 40
	plProducers       = 3
	plPartitions      = 4
	plInFlight        = 5 // a Kafka producer's max.in.flight.requests.per.connection
)

// plBatch is one batch as a producer knows it.
type plBatch struct {
	pid       int64
	partition int
	seq       int32
	records   int32
}

func (b plBatch) String() string {
	return fmt.Sprintf("producer %d partition %d seq %d", b.pid, b.partition, b.seq)
}

type plProducer struct {
	pid     int64
	nextSeq [plPartitions]int32
	// unanswered: sent and not acknowledged before the crash, in send order: retried after
	// the restart.
	unanswered []plBatch
	stalled    atomic.Bool // refused on a full disk: sends nothing more until the restart
}

// powerLossRun is the producers' side of the test: what was acknowledged, and where.
type powerLossRun struct {
	t      *testing.T
	rng    *rand.Rand
	layout string
	segFS  *segfs.MemFS
	pebFS  *vfs.MemFS

	producers []*plProducer
	mu        sync.Mutex
	crashed   bool
	fullDisk  bool // a full-disk episode happened in this cycle (under mu)
	// prevFullDisk: one happened in the cycle before this one, whose batches are retried.
	prevFullDisk bool
	refused      int // appends refused on a full disk, over the run (under mu)
	// firstBatchesLost: a producer's first batches on a partition, refused on a full disk,
	// whose retries met Kafka's leniency for a producer with no window (see cycle).
	firstBatchesLost int
	acked            map[plBatch]int64 // batch -> acknowledged base offset
}

func TestPowerLoss(t *testing.T) {
	seed := *powerLossSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for _, layout := range []string{LayoutSegments, LayoutPebble} {
		t.Run(layout, func(t *testing.T) {
			r := &powerLossRun{t: t, rng: rand.New(rand.NewPCG(seed, 7)), layout: layout,
				segFS: segfs.NewCrashableMem(), pebFS: vfs.NewCrashableMem(), acked: map[plBatch]int64{}}
			for i := range plProducers {
				r.producers = append(r.producers, &plProducer{pid: int64(1000 + i)})
			}
			crashes := *powerLossCrashes
			if raceEnabled {
				crashes = min(crashes, 30) // ten times slower; the plain run does them all
			}
			for crash := 0; crash < crashes; crash++ {
				if crash%powerLossDiskLife == 0 {
					// A fresh disk now and then keeps each check's full read short.
					r.segFS, r.pebFS = segfs.NewCrashableMem(), vfs.NewCrashableMem()
					r.acked = map[plBatch]int64{}
					for _, p := range r.producers {
						p.unanswered = nil
						p.pid += plProducers // new producers: the old ones' state went with the disk
						p.nextSeq = [plPartitions]int32{}
					}
				}
				if !r.cycle(crash % powerLossDiskLife) {
					t.Fatalf("failed at crash point %d; rerun with -powerloss.seed=%d", crash, seed)
				}
			}
			t.Logf("%d crash points, %d appends refused on a full disk (%d first batches then older than their window), seed %d",
				crashes, r.refused, r.firstBatchesLost, seed)
		})
	}
}

func (r *powerLossRun) open() *Log {
	opts := Options{Dir: "/data", Layout: r.layout, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20,
		SegmentBytes: 16 << 10, SegmentFS: r.segFS, PebbleFS: r.pebFS,
		OnFatal: func(err error) { r.t.Errorf("log failed: %v", err) }}
	if r.layout == LayoutSegments {
		opts.BufferedSegments = r.rng.IntN(2) == 0
		opts.CheckpointInterval = []time.Duration{-1, time.Millisecond, 0}[r.rng.IntN(3)]
	}
	l, err := OpenNoSpaceRetry(opts, 200*time.Microsecond)
	if err != nil {
		r.t.Fatalf("reopen after a crash: %v", err)
	}
	return l
}

// cycle opens the log on what the last crash left, checks it, retries what was not answered,
// runs the producers, and crashes at a random moment. It reports whether the checks held.
func (r *powerLossRun) cycle(crash int) bool {
	t := r.t
	l := r.open()
	topic, ok := l.Topic("t")
	if !ok {
		if crash > 0 && len(r.acked) > 0 {
			t.Errorf("topic lost though batches were acknowledged in it")
			return false
		}
		var err error
		// The batches carry timestamp 0: kept forever, not 7 days from 1970.
		if topic, err = l.CreateTopic("t", plPartitions, map[string]string{"retention.ms": "-1"}); err != nil {
			t.Fatal(err)
		}
	}
	found, ok := r.check(l, topic)
	if !ok {
		return false
	}
	// Retry what the producers were not answered, in order, as a client does after
	// reconnecting: durable batches must be answered as duplicates at their offsets, the
	// others written.
	r.crashed, r.prevFullDisk, r.fullDisk = false, r.fullDisk, false
	for _, p := range r.producers {
		p.stalled.Store(false)
	}
	for _, p := range r.producers {
		retries := p.unanswered
		p.unanswered = nil
		for _, b := range retries {
			a := r.submit(l, topic, b)
			if a.Err == wire.ErrDuplicateSequenceNumber && r.prevFullDisk && !r.storedUpTo(found, b) {
				// Kafka's leniency, kept: a producer with no window on a partition may start
				// at any sequence (its window may have expired). So when its first batches
				// there were refused on a full disk and a later one then written, their
				// retries are older than the window: DUPLICATE_SEQUENCE_NUMBER, which
				// clients take for success. They were never acknowledged, so the invariant
				// holds; they are counted.
				r.firstBatchesLost++
				continue
			}
			if a.Err != wire.ErrNone {
				t.Errorf("retry of %v after crash %d: error %d; stored of its producer there: %v; retries: %v",
					b, crash, a.Err, r.storedOf(found, b), retries)
				return false
			}
			if off, was := found[b]; was && a.BaseOffset != off {
				t.Errorf("retry of %v, durable at %d, answered at %d", b, off, a.BaseOffset)
				return false
			}
			r.acked[b] = a.BaseOffset
		}
	}
	if _, ok := r.check(l, topic); !ok {
		return false
	}
	if r.rng.IntN(8) == 0 {
		// Crash before anything new is written: the retries that were duplicates made a
		// group that writes nothing, and moved the checkpoint to the aligned end of a
		// segment cut at a torn entry.
		r.crash(l, nil, nil)
		return !t.Failed()
	}

	// Produce flat out and crash at a random moment.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if r.layout == LayoutSegments {
		// Beside the producers, a firehose whose retention keeps 32 KiB per partition and
		// retention passes: the producers' batches, which never expire, are copied forward
		// out of the segments the firehose frees (reclaim.go), crashes included.
		u := passes(l)
		fire, ok := l.Topic("fire")
		if !ok {
			var err error
			if fire, err = l.CreateTopic("fire", 2, map[string]string{"retention.bytes": "32768", "retention.ms": "-1"}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				done := make(chan struct{})
				l.Submit(&Request{Appends: []Append{stampedBatch(fire.Partitions[i%2], 4, 0, 1024, 'f')}, Done: func(*Request) { close(done) }})
				<-done
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				if err := u.EnforceRetention(time.Now()); err != nil {
					r.mu.Lock()
					full := r.fullDisk
					r.mu.Unlock()
					if !full {
						t.Errorf("retention pass: %v", err)
						return
					}
				}
			}
		}()
	}
	for _, p := range r.producers {
		wg.Add(1)
		rng := rand.New(rand.NewPCG(r.rng.Uint64(), uint64(p.pid)))
		go func() {
			defer wg.Done()
			r.produce(l, topic, p, rng, stop)
		}()
	}
	if r.layout == LayoutSegments && r.rng.IntN(3) == 0 {
		// A full disk for a while: segment writes fail with ENOSPC, then space returns
		// (or not, before the crash).
		var full atomic.Bool
		rng := rand.New(rand.NewPCG(r.rng.Uint64(), 3))
		var rngMu sync.Mutex
		r.segFS.Inject(func(op segfs.Op, name string) error {
			if op != segfs.OpWrite || !full.Load() {
				return nil
			}
			rngMu.Lock()
			defer rngMu.Unlock()
			if rng.IntN(2) == 0 {
				// The disk fills in the middle of the write: its first bytes land.
				return &segfs.ShortWrite{N: rng.IntN(64 << 10), Err: syscall.ENOSPC}
			}
			return syscall.ENOSPC
		})
		time.Sleep(time.Duration(r.rng.IntN(1000)) * time.Microsecond)
		r.mu.Lock()
		r.fullDisk = true
		r.mu.Unlock()
		full.Store(true)
		time.Sleep(time.Duration(r.rng.IntN(2000)) * time.Microsecond)
		full.Store(r.rng.IntN(4) == 0)
	}
	time.Sleep(time.Duration(r.rng.IntN(3000)) * time.Microsecond)
	r.crash(l, stop, &wg)
	return !t.Failed()
}

// crash cuts the file systems at this instant, stops the goroutines (stop, wg) and closes l
// on what it leaves behind; the next cycle opens what the crash kept.
func (r *powerLossRun) crash(l *Log, stop chan struct{}, wg *sync.WaitGroup) {
	// A process kill keeps what was written and not synced for a later power loss to lose
	// (in Pebble's vfs, a clone keeping all unsynced data, which it then counts as synced).
	mode := []segfs.CrashMode{segfs.SyncedOnly, segfs.TornPrefix, segfs.RandomBlocks, segfs.ProcessKill}[r.rng.IntN(4)]
	pebKeeps := 0
	if mode == segfs.ProcessKill {
		pebKeeps = 100
	}
	r.mu.Lock()
	r.crashed = true // answers from now on are never seen by a producer
	r.mu.Unlock()
	var pebAfter *vfs.MemFS
	segAfter := r.segFS.Crash(mode, r.rng, func() {
		pebAfter = r.pebFS.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pebKeeps, RNG: r.rng})
	})
	if stop != nil {
		close(stop)
		wg.Wait()
	}
	l.Close() // on the file systems the crash left behind
	r.segFS, r.pebFS = segAfter, pebAfter
}

// produce sends batches of p until stop, up to plInFlight requests in flight, each request
// one batch for a random partition, and notes each as unanswered until its answer comes.
func (r *powerLossRun) produce(l *Log, topic *Topic, p *plProducer, rng *rand.Rand, stop chan struct{}) {
	slots := make(chan struct{}, plInFlight)
	for {
		select {
		case <-stop:
			return
		case slots <- struct{}{}:
		}
		if p.stalled.Load() {
			// Checked after the slot is taken: the refusal that stalls the producer frees
			// a slot, which must not carry one more batch.
			return
		}
		part := rng.IntN(plPartitions)
		b := plBatch{pid: p.pid, partition: part, seq: p.nextSeq[part], records: int32(1 + rng.IntN(20))}
		p.nextSeq[part] += b.records
		r.mu.Lock()
		p.unanswered = append(p.unanswered, b)
		r.mu.Unlock()
		a := r.appendFor(topic, b, rng.IntN(300))
		l.Submit(&Request{Appends: []Append{a}, Done: func(req *Request) {
			// The slot is freed last, so a refusal stalls the producer before it can send
			// again: at most plInFlight batches follow one left unanswered, and a retry of
			// it stays within the producer window. An answer after the crash frees none:
			// the producer never saw it, so it sends nothing more (the file systems are
			// cloned after the crash flag is set, and batches sent meanwhile could be kept).
			release := true
			defer func() {
				if release {
					<-slots
				}
			}()
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.crashed {
				release = false
				return
			}
			switch code := req.Appends[0].Err; {
			case code == wire.ErrNone:
			case r.fullDisk && (code == wire.ErrKafkaStorageError || code == wire.ErrOutOfOrderSequenceNumber):
				// A full disk: the producer stops and retries everything unanswered after the
				// restart, in order. A batch after a refused one is out of order, unless
				// the refused one was written whole after all (then it is a duplicate
				// on retry).
				p.stalled.Store(true)
				r.refused++
				return
			default:
				r.t.Errorf("%v answered with error %d before any crash", b, code)
				return
			}
			r.acked[b] = req.Appends[0].BaseOffset
			for i, u := range p.unanswered {
				if u == b {
					p.unanswered = append(p.unanswered[:i], p.unanswered[i+1:]...)
					break
				}
			}
		}})
	}
}

func (r *powerLossRun) appendFor(topic *Topic, b plBatch, pad int) Append {
	body := make([]byte, 61+1+pad)
	binary.BigEndian.PutUint64(body[43:], uint64(b.pid))
	binary.BigEndian.PutUint32(body[53:], uint32(b.seq))
	body[61] = byte(b.partition)
	return Append{Partition: topic.Partitions[b.partition], Batch: sealBatch(body, b.records),
		ProducerID: b.pid, BaseSequence: b.seq, NumRecords: b.records}
}

// submit sends one batch and waits for its answer.
func (r *powerLossRun) submit(l *Log, topic *Topic, b plBatch) Append {
	return submitWait(r.t, l, r.appendFor(topic, b, 0)).Appends[0]
}

// storedOf lists the stored batches of b's producer on b's partition, for a failure message.
func (r *powerLossRun) storedOf(found map[plBatch]int64, b plBatch) []string {
	var out []string
	for f, off := range found {
		if f.pid == b.pid && f.partition == b.partition {
			out = append(out, fmt.Sprintf("seq %d+%d at %d", f.seq, f.records, off))
		}
	}
	sort.Strings(out)
	return out
}

// storedUpTo reports whether b, or a batch of its producer on its partition with a lower
// sequence, is stored.
func (r *powerLossRun) storedUpTo(found map[plBatch]int64, b plBatch) bool {
	for f := range found {
		if f.pid == b.pid && f.partition == b.partition && f.seq <= b.seq {
			return true
		}
	}
	return false
}

// check reads every partition to its high watermark and verifies the invariant. It returns
// where each batch it found lies.
func (r *powerLossRun) check(l *Log, topic *Topic) (map[plBatch]int64, bool) {
	t := r.t
	found := map[plBatch]int64{}
	for part, p := range topic.Partitions {
		hw := p.HighWatermark()
		data, err := l.ReadBatches(p, 0, hw, 1<<30, true, nil)
		if err != nil {
			t.Errorf("read partition %d: %v", part, err)
			return nil, false
		}
		next := int64(0)
		for len(data) > 0 {
			size := 12 + int(binary.BigEndian.Uint32(data[8:]))
			base := int64(binary.BigEndian.Uint64(data))
			records := int32(binary.BigEndian.Uint32(data[23:])) + 1
			b := plBatch{pid: int64(binary.BigEndian.Uint64(data[43:])), partition: part,
				seq: int32(binary.BigEndian.Uint32(data[53:])), records: records}
			if base != next {
				t.Errorf("partition %d: batch at %d, expected %d (%v)", part, base, next, b)
				return nil, false
			}
			if int(data[61]) != part {
				t.Errorf("partition %d holds a batch of partition %d", part, data[61])
				return nil, false
			}
			if prev, dup := found[b]; dup {
				t.Errorf("%v stored twice, at %d and %d", b, prev, base)
				return nil, false
			}
			found[b] = base
			next = base + int64(records)
			data = data[size:]
		}
		if next != hw {
			t.Errorf("partition %d: high watermark %d, data ends at %d", part, hw, next)
			return nil, false
		}
	}
	for b, off := range r.acked {
		got, ok := found[b]
		if !ok {
			t.Errorf("acknowledged %v at %d is lost", b, off)
			return nil, false
		}
		if got != off {
			t.Errorf("acknowledged %v at %d is at %d", b, off, got)
			return nil, false
		}
	}
	return found, true
}
