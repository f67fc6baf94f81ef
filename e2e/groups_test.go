package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceN writes n records round robin over the topic's partitions with kgo and waits for
// every ack.
func produceN(t *testing.T, addr, topic string, n int, tag string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
}

// consumeGroup reads with a kgo group consumer until want records arrived, committing as it
// goes (autocommit on close), and returns the values.
func consumeGroup(t *testing.T, addr, group, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var vals []string
	for len(vals) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s: consumed %d of %d records before the deadline", group, len(vals), want)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	return vals
}

// TestKgoGroupConsumesAndResumesAfterRestart guards the group path with franz-go: a group
// consumer reads everything and commits, the node restarts, and the same group resumes after
// its committed offsets instead of rereading.
func TestKgoGroupConsumesAndResumesAfterRestart(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "kgo-group"
	b.createTopic(topic, 3)
	produceN(t, b.addr, topic, 30, "first")
	if got := consumeGroup(t, b.addr, "g1", topic, 30); len(got) != 30 {
		t.Fatalf("consumed %d records, want 30", len(got))
	}
	b.restart()
	produceN(t, b.addr, topic, 9, "second")
	got := consumeGroup(t, b.addr, "g1", topic, 9)
	for _, v := range got {
		if len(v) < 7 || v[:7] != "second-" {
			t.Fatalf("after restart the group reread %q; committed offsets were lost", v)
		}
	}
	adm := kadm.NewClient(newKgo(t, b.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 39 {
		t.Fatalf("committed offsets sum to %d, want 39", total)
	}
}

func newKgo(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
