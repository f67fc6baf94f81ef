package crashtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// numberedProducers writes records numbered 0, 1, 2, ... to each partition of a topic from one
// goroutine a partition (about 10,000 records a second a partition, 210 bytes each), through
// one idempotent franz-go client that retries until deliveryTimeout, and remembers which
// numbers were acknowledged: what a node that is killed, restored or fenced meanwhile must
// still serve, once each, in order.
type numberedProducers struct {
	prod  *kgo.Client
	mu    sync.Mutex
	acked []map[int]bool // by partition: the numbers acknowledged
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startNumberedProducers(t *testing.T, ctx context.Context, addr, topic string, partitions int32, deliveryTimeout time.Duration) *numberedProducers {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(deliveryTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	np := &numberedProducers{prod: prod, acked: make([]map[int]bool, partitions), stop: make(chan struct{})}
	for p := range np.acked {
		np.acked[p] = map[int]bool{}
	}
	for p := int32(0); p < partitions; p++ {
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
				prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, func(r *kgo.Record, err error) {
					if err == nil {
						np.mu.Lock()
						np.acked[p][i] = true
						np.mu.Unlock()
					}
				})
				if i%200 == 199 {
					time.Sleep(20 * time.Millisecond)
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
	if err := np.prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// check fails the test unless got, partition p's numbers as read from offset 0, is 0, 1, 2, ...
// without a gap or a repeat and holds every number acknowledged; it returns how many were.
func (np *numberedProducers) check(t *testing.T, p int32, got []int) (acked int) {
	t.Helper()
	np.mu.Lock()
	defer np.mu.Unlock()
	for i, num := range got {
		if num != i {
			t.Fatalf("partition %d: record %d is number %d (a record lost, or stored twice)", p, i, num)
		}
	}
	for num := range np.acked[p] {
		if num >= len(got) {
			t.Fatalf("partition %d: acknowledged record %d missing (read %d)", p, num, len(got))
		}
	}
	return len(np.acked[p])
}
