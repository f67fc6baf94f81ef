package crashtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// numberedProducers writes records numbered 0, 1, 2, ... to each partition of a topic from one
// goroutine a partition (210 bytes each, at the pace below), through idempotent franz-go
// clients that retry until deliveryTimeout, and remembers which numbers were acknowledged:
// what a node that is killed, restored or fenced meanwhile must still serve, once each, in
// order.
type numberedProducers struct {
	prods []*kgo.Client // one for every partition, or one for all
	mu    sync.Mutex
	acked []map[int]bool // by partition: the numbers acknowledged
	// since and firstAck: the first acknowledgement of a record sent at or after since (see
	// markSent), zero until then; what a failover measures as producing again.
	since, firstAck time.Time
	failed          int   // records whose produce failed (retries or delivery timeout exhausted)
	firstErr        error // the first of those failures
	stop            chan struct{}
	wg              sync.WaitGroup
}

// numberedPace is how each partition's goroutine writes: burst records, then a pause; with
// clientEach, through a client of its own (a producer id, and its sequence window, per
// partition) rather than one client for all.
type numberedPace struct {
	burst      int
	pause      time.Duration
	clientEach bool
}

// fullPace is about 10,000 records a second a partition, through one client.
var fullPace = numberedPace{burst: 200, pause: 20 * time.Millisecond}

// startNumberedProducers: addr is one address, or several separated by commas (the clients'
// seed brokers).
func startNumberedProducers(t *testing.T, ctx context.Context, addr, topic string, partitions int32, deliveryTimeout time.Duration) *numberedProducers {
	t.Helper()
	return startNumberedProducersPaced(t, ctx, addr, topic, partitions, deliveryTimeout, fullPace)
}

func startNumberedProducersPaced(t *testing.T, ctx context.Context, addr, topic string, partitions int32, deliveryTimeout time.Duration, pace numberedPace) *numberedProducers {
	t.Helper()
	np := &numberedProducers{acked: make([]map[int]bool, partitions), stop: make(chan struct{})}
	clients := int32(1)
	if pace.clientEach {
		clients = partitions
	}
	for range clients {
		prod, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerLinger(5*time.Millisecond),
			kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(deliveryTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(prod.Close)
		np.prods = append(np.prods, prod)
	}
	for p := range np.acked {
		np.acked[p] = map[int]bool{}
	}
	for p := int32(0); p < partitions; p++ {
		prod := np.prods[p%clients]
		np.wg.Add(1)
		go func() {
			defer np.wg.Done()
			pad := make([]byte, 200)
			for i := 0; ; i++ {
				select {
				case <-np.stop:
					return
				default:
				}
				v := append([]byte(fmt.Sprintf("%09d:", i)), pad...)
				sent := time.Now()
				prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, func(r *kgo.Record, err error) {
					if err == nil {
						np.mu.Lock()
						np.acked[p][i] = true
						if np.firstAck.IsZero() && !np.since.IsZero() && !sent.Before(np.since) {
							np.firstAck = time.Now()
						}
						np.mu.Unlock()
						return
					}
					np.mu.Lock()
					if np.failed++; np.firstErr == nil {
						np.firstErr = fmt.Errorf("partition %d, number %d: %w", p, i, err)
					}
					np.mu.Unlock()
				})
				if i%pace.burst == pace.burst-1 {
					time.Sleep(pace.pause)
				}
			}
		}()
	}
	return np
}

// finish stops producing and waits for every record sent to be acknowledged or to fail.
func (np *numberedProducers) finish(t *testing.T, ctx context.Context) {
	t.Helper()
	close(np.stop)
	np.wg.Wait()
	for _, prod := range np.prods {
		if err := prod.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
}

// markSent starts a measure and returns its start: firstAckSince reports when the first record
// sent from then on was acknowledged.
func (np *numberedProducers) markSent() time.Time {
	np.mu.Lock()
	defer np.mu.Unlock()
	np.since, np.firstAck = time.Now(), time.Time{}
	return np.since
}

// firstAckSince is when the first record sent since markSent was acknowledged; zero until
// one is.
func (np *numberedProducers) firstAckSince() time.Time {
	np.mu.Lock()
	defer np.mu.Unlock()
	return np.firstAck
}

// ackedCount is how many records have been acknowledged so far, over every partition.
func (np *numberedProducers) ackedCount() int {
	np.mu.Lock()
	defer np.mu.Unlock()
	n := 0
	for _, a := range np.acked {
		n += len(a)
	}
	return n
}

// check fails the test unless got, partition p's numbers as read from offset 0, is 0, 1, 2, ...
// without a gap or a repeat and holds every number acknowledged; it returns how many were.
func (np *numberedProducers) check(t *testing.T, p int32, got []int) (acked int) {
	t.Helper()
	np.mu.Lock()
	defer np.mu.Unlock()
	for i, num := range got {
		if num != i {
			t.Fatalf("partition %d: record %d is number %d (a record lost, or stored twice); %d records failed to produce, the first: %v", p, i, num, np.failed, np.firstErr)
		}
	}
	for num := range np.acked[p] {
		if num >= len(got) {
			t.Fatalf("partition %d: acknowledged record %d missing (read %d)", p, num, len(got))
		}
	}
	return len(np.acked[p])
}
