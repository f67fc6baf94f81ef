package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// backpressureValue is producer p's i-th record: a 12-byte tag, then bytes derived from
// (p, i), so every record is distinct and checkable without keeping a copy.
func backpressureValue(p, i, size int) []byte {
	v := make([]byte, size)
	copy(v, fmt.Sprintf("p%02d-%07d|", p, i))
	r := rand.New(rand.NewPCG(uint64(p), uint64(i)))
	for j := 12; j+8 <= size; j += 8 {
		binary.LittleEndian.PutUint64(v[j:], r.Uint64())
	}
	return v
}

// TestBackpressureOneProducerLosesNothing guards the in-flight budget's stalls: with a budget
// of 1 MiB (about one producer batch) a pipelining idempotent producer makes the event loop
// wait for the committer again and again, and yet every record is acknowledged exactly once
// and reads back byte for byte, in order. Timing is not asserted, only correctness.
func TestBackpressureOneProducerLosesNothing(t *testing.T) {
	runBackpressure(t, 1, 20<<20)
}

// TestBackpressureManyProducersLosesNothing is the same with eight producers pushing 50 MB
// of 10 KB records through two event loops, so frames of different connections are partly
// read when a loop has to wait.
func TestBackpressureManyProducersLosesNothing(t *testing.T) {
	runBackpressure(t, 8, 50<<20)
}

// TestBackpressurePartialFrameDoesNotWedgeLoop guards the loop against waiting on itself: on
// one event loop, connection A has started a 600 KB frame and connection B another, with a
// 1 MiB budget. A's frame is the oldest in transit, so it is admitted over the limit, read,
// committed and answered (which frees the budget); then B's frame is served too.
func TestBackpressurePartialFrameDoesNotWedgeLoop(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.InflightBudget = 1 << 20
		c.Workers = 1
	})
	b.createTopic("wedge", 1)
	big := func(tag string) *kmsg.ProduceRequest {
		s := plainBatch(1, 1000, tag)
		s.records[0].value = make([]byte, 600<<10)
		return produceReq(9, -1, "wedge", 0, s.encode())
	}
	ca, cb := dialRaw(t, b.addr), dialRaw(t, b.addr)
	reqA, reqB := big("a"), big("b")
	frameA, corrA := ca.frame(reqA)
	frameB, corrB := cb.frame(reqB)

	ca.write(frameA[:64<<10]) // A's frame is in transit, the oldest
	time.Sleep(100 * time.Millisecond)
	cb.write(frameB[:64<<10]) // B's too
	time.Sleep(100 * time.Millisecond)
	ca.write(frameA[64<<10:]) // the rest of A: more than the budget holds with B's part

	gotCorr, body, err := ca.readFrame(5 * time.Second)
	if err != nil {
		b.abandon()
		t.Fatalf("A's produce was never answered (%v): the event loop is wedged", err)
	}
	if gotCorr != corrA {
		t.Fatalf("A: correlation id %d, want %d", gotCorr, corrA)
	}
	if resp, err := decodeResponse(reqA, body); err != nil || resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("A: %v %+v", err, resp)
	}
	cb.write(frameB[64<<10:])
	pb := cb.recv(reqB, corrB).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if pb.ErrorCode != 0 {
		t.Errorf("B: error %d", pb.ErrorCode)
	}
}

// TestBudgetRefusesFramesInTransitBeyondIt: frames still arriving hold what has arrived of
// them, and when the budget is full of such frames the loop cannot wait (only it can complete
// them), so a frame that needs more and is not the oldest is refused: its connection is
// closed. The oldest is still served, and so are new connections. This is what bounds the
// memory a client can pin by declaring large frames and sending them slowly.
func TestBudgetRefusesFramesInTransitBeyondIt(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.InflightBudget = 1 << 20
		c.Workers = 1
	})
	b.createTopic("refuse", 1)
	s := plainBatch(1, 1000, "a")
	s.records[0].value = make([]byte, 800<<10)
	reqA := produceReq(9, -1, "refuse", 0, s.encode())
	ca, cb := dialRaw(t, b.addr), dialRaw(t, b.addr)
	frameA, corrA := ca.frame(reqA)
	ca.write(frameA[:len(frameA)-1000]) // the oldest frame in transit, holding the whole budget
	time.Sleep(200 * time.Millisecond)
	// B declares 900 KB and sends 200 KB of it: it needs budget that only frames in transit
	// hold, and it is not the oldest.
	cb.write(binary.BigEndian.AppendUint32(nil, 900<<10))
	cb.write(append([]byte{0, 18, 0, 3, 0, 0, 0, 1}, make([]byte, 200<<10)...))
	cb.expectClosed()

	ca.write(frameA[len(frameA)-1000:])
	if p := ca.recv(reqA, corrA).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Errorf("A: error %d", p.ErrorCode)
	}
	dialRaw(t, b.addr).alive()
}

func runBackpressure(t *testing.T, producers, totalBytes int) {
	b := startBroker(t, func(c *server.Config) {
		c.InflightBudget = 1 << 20
		c.Workers = 2
	})
	const (
		topic      = "backpressure"
		partitions = 8
		recordSize = 10 << 10
	)
	perProd := totalBytes / recordSize / producers
	b.createTopic(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stored := func() int64 {
		var n int64
		for p := int32(0); p < partitions; p++ {
			n += b.highWatermark(topic, p)
		}
		return n
	}

	// A watchdog: if nothing is committed for 10s while producers still run, the server is
	// wedged; stop the producers and leave the broker behind (its Shutdown would hang too).
	wedged := make(chan struct{})
	producing := make(chan struct{})
	go func() {
		last, since := int64(-1), time.Now()
		for {
			select {
			case <-producing:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if n := stored(); n != last {
				last, since = n, time.Now()
			} else if time.Since(since) > 10*time.Second {
				close(wedged)
				cancel()
				return
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(b.addr),
				kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ProducerLinger(0),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
			)
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			var (
				mu       sync.Mutex
				firstErr error
			)
			for i := 0; i < perProd; i++ {
				// Each producer spreads over every partition, so producers share partitions
				// and batches from different connections interleave in groups.
				r := &kgo.Record{Topic: topic, Partition: int32((p + i) % partitions), Key: []byte(fmt.Sprintf("p%02d", p)), Value: backpressureValue(p, i, recordSize)}
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				errs <- fmt.Errorf("producer %d flush: %w", p, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if firstErr != nil {
				errs <- fmt.Errorf("producer %d: %w", p, firstErr)
			}
		}(p)
	}
	wg.Wait()
	close(producing)
	select {
	case <-wedged:
		n := stored()
		b.abandon()
		t.Fatalf("no commit for 10s with %d of %d records stored: the server is wedged", n, producers*perProd)
	default:
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	total := stored()
	if total != int64(producers*perProd) {
		t.Fatalf("%d records stored, want %d (each acknowledged record exactly once)", total, producers*perProd)
	}

	// Read everything back: each producer's records in order within each partition, each
	// once, each byte for byte.
	next := map[[2]int]int{} // (producer, partition) -> next record index expected there
	seen := make([]int, producers)
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var read int64
	for read < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", read, total, ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			read++
			var p, i int
			if _, err := fmt.Sscanf(string(r.Value[:12]), "p%02d-%07d|", &p, &i); err != nil || p < 0 || p >= producers {
				t.Fatalf("offset %d/%d: unrecognised value %q", r.Partition, r.Offset, r.Value[:12])
			}
			if int32((p+i)%partitions) != r.Partition {
				t.Fatalf("record p%d/%d found in partition %d", p, i, r.Partition)
			}
			k := [2]int{p, int(r.Partition)}
			want, ok := next[k]
			if !ok {
				want = (int(r.Partition) - p%partitions + partitions) % partitions
			}
			if i != want {
				t.Fatalf("partition %d offset %d: producer %d record %d, want record %d (lost, duplicated or reordered)", r.Partition, r.Offset, p, i, want)
			}
			next[k] = i + partitions
			if !bytes.Equal(r.Value, backpressureValue(p, i, recordSize)) {
				t.Fatalf("producer %d record %d: value differs", p, i)
			}
			seen[p]++
		})
	}
	for p, n := range seen {
		if n != perProd {
			t.Errorf("producer %d: %d records read back, want %d", p, n, perProd)
		}
	}
}
