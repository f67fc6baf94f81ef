package crashtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKIP848GroupSurvivesKill9: two franz-go members of a KIP-848 group share a topic and
// commit what they consume; the node is killed (SIGKILL) and restarted. The group comes back
// with the same epoch, members and assignments (each partition with one member), the
// members carry on without a rebalance, no record consumed and committed before the kill is
// consumed again, and no partition is consumed by both members after it.
func TestKIP848GroupSurvivesKill9(t *testing.T) {
	n := startInlet(t, "--group-consumer-heartbeat-interval-ms", "250")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, group = "k848-kill", "k848-kill-g"
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 5000
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: 4, ReplicationFactor: 1}}
	if resp, err := ct.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %v", resp, err)
	}
	produce := func(tag string, count int) {
		t.Helper()
		prod, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		var recs []*kgo.Record
		for i := 0; i < count; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte(fmt.Sprintf("%s-%d", tag, i))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("before", 400)

	// Each member commits synchronously after handling each poll, and notes which
	// partitions it consumed from and every value it saw.
	type seen struct {
		member    string
		partition int32
		value     string
	}
	var mu sync.Mutex
	var log []seen
	afterKill := false
	var afterLog []seen
	start := func(name string) (*kgo.Client, chan struct{}) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					s := seen{name, r.Partition, string(r.Value)}
					log = append(log, s)
					if afterKill {
						afterLog = append(afterLog, s)
					}
				})
				mu.Unlock()
				_ = cl.CommitUncommittedOffsets(ctx)
			}
		}()
		return cl, done
	}
	a, aDone := start("A")
	defer func() { a.Close(); <-aDone }()
	b, bDone := start("B")
	defer func() { b.Close(); <-bDone }()

	describe := func() kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("describe: %v %v", resp, err)
		}
		return resp.Groups[0]
	}
	// shape is the group's members and what each holds, as one comparable string.
	shape := func(g kmsg.ConsumerGroupDescribeResponseGroup) string {
		var out []string
		owned := map[int32]string{}
		for _, m := range g.Members {
			var ps []int32
			for _, tp := range m.Assignment.TopicPartitions {
				for _, p := range tp.Partitions {
					if o, dup := owned[p]; dup {
						t.Fatalf("partition %d held by %s and %s", p, o, m.MemberID)
					}
					owned[p] = m.MemberID
					ps = append(ps, p)
				}
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			out = append(out, fmt.Sprintf("%s@%d:%v", m.MemberID, m.MemberEpoch, ps))
		}
		sort.Strings(out)
		return fmt.Sprintf("epoch %d/%d %v", g.Epoch, g.AssignmentEpoch, out)
	}
	waitStable := func() kmsg.ConsumerGroupDescribeResponseGroup {
		t.Helper()
		for {
			g := describe()
			n := 0
			for _, m := range g.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					n += len(tp.Partitions)
				}
			}
			if g.State == "Stable" && len(g.Members) == 2 && n == 4 {
				return g
			}
			if ctx.Err() != nil {
				t.Fatalf("group never stable with two members: %s %s", g.State, shape(g))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitValues := func(tag string, count int) {
		t.Helper()
		for {
			mu.Lock()
			got := map[string]bool{}
			for _, s := range log {
				got[s.value] = true
			}
			mu.Unlock()
			missing := 0
			for i := 0; i < count; i++ {
				if !got[fmt.Sprintf("%s-%d", tag, i)] {
					missing++
				}
			}
			if missing == 0 {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%d %q records never consumed", missing, tag)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitStable()
	waitValues("before", 400)
	// Every partition's committed offset at its end (100 records each) before the kill.
	for {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group = group
		resp, err := of.RequestWith(ctx, admin)
		done := 0
		if err == nil {
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					if p.Offset == 100 {
						done++
					}
				}
			}
		}
		if done == 4 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("offsets never committed: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := shape(waitStable())

	mu.Lock()
	afterKill = true
	mu.Unlock()
	n.kill()
	n.restart()
	if after := shape(describe()); after != before {
		t.Fatalf("group after kill -9:\n  %s\nwant as before:\n  %s", after, before)
	}
	produce("after", 400)
	waitValues("after", 400)
	if after := shape(waitStable()); after != before {
		t.Errorf("group after the members carried on:\n  %s\nwant as before (no rebalance):\n  %s", after, before)
	}
	mu.Lock()
	defer mu.Unlock()
	owner := map[int32]string{}
	for _, s := range afterLog {
		if len(s.value) > 7 && s.value[:7] == "before-" {
			t.Errorf("%s consumed %s again after the restart (committed before the kill)", s.member, s.value)
		}
		if o, ok := owner[s.partition]; ok && o != s.member {
			t.Errorf("partition %d consumed by %s and %s after the restart", s.partition, o, s.member)
		}
		owner[s.partition] = s.member
	}
}
