package crashtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/objstore/objtest"
)

// TestKill9AndLostDiskKeepEveryAcknowledgedDisklessRecord: a node on versitygw whose every
// start deletes nothing but finds an empty data directory and passes --restore-from-remote
// (the first start included: an empty bucket makes a new node) serves a diskless topic that
// idempotent producers write to flat out; it is SIGKILLed and its data directory deleted three
// times, each time restored from the bucket alone. After the last restore every
// acknowledged record is read once, in order, from offset 0: nothing acknowledged was lost
// with the disk, and the producers' retries across the losses stored nothing twice (their
// windows came back from the commit objects).
func TestKill9AndLostDiskKeepEveryAcknowledgedDisklessRecord(t *testing.T) {
	s3 := objtest.StartVersity(t)
	for _, kv := range s3.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	n := startInlet(t, "--s3-bucket", s3.Bucket, "--s3-endpoint", s3.Endpoint, "--s3-path-style", "--s3-prefix", "diskless/",
		"--restore-from-remote", "--bucket-lease-ms", "1000") // a restart after a SIGKILL waits one lease for the old one

	const topic, partitions = "orders", 2
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	admin.Close()

	prod, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordRetries(1<<30), kgo.RecordDeliveryTimeout(150*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	acked := make([]map[int]bool, partitions)
	for p := range acked {
		acked[p] = map[int]bool{}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := int32(0); p < partitions; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pad := make([]byte, 200)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := append([]byte(fmt.Sprintf("%09d:", i)), pad...)
				prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acked[p][i] = true
						mu.Unlock()
					}
				})
				if i%200 == 199 {
					time.Sleep(20 * time.Millisecond) // about 10,000 records/s a partition
				}
			}
		}()
	}
	for k := 1; k <= 3; k++ {
		time.Sleep(1500 * time.Millisecond)
		n.kill()
		if err := os.RemoveAll(n.dir); err != nil {
			t.Fatal(err)
		}
		n.restart()
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := int32(0); p < partitions; p++ {
		hw, _ := listOffsets(t, ctx, cl, topic, p)
		got := readPartition(t, ctx, n.addr(), topic, p, hw)
		mu.Lock()
		want := len(acked[p])
		for i, num := range got {
			if num != i {
				mu.Unlock()
				t.Fatalf("partition %d: record %d is number %d (a record lost, or stored twice)", p, i, num)
			}
		}
		for num := range acked[p] {
			if num >= len(got) {
				mu.Unlock()
				t.Fatalf("partition %d: acknowledged record %d missing after the lost disks (read %d)", p, num, len(got))
			}
		}
		mu.Unlock()
		if want == 0 {
			t.Fatalf("partition %d: nothing acknowledged", p)
		}
		t.Logf("partition %d: %d acknowledged, %d read from 0 to %d after three lost disks", p, want, len(got), hw)
	}
}
