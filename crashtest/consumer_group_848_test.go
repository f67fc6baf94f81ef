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

// TestKIP848RebalancesAcrossKill9s: members of a KIP-848 group join and leave while the node
// is SIGKILLed four times, each kill landing within half a second of a join or a leave, so
// mid-rebalance (revocations pending, partitions waiting to be released). Members commit
// after each poll and hold rebalances while they process (BlockRebalanceOnPoll), so a
// partition's records are consumed by one member at a time exactly when the coordinator
// never gives it to two. From the records consumed:
//   - no partition is consumed by two members at once: each member's runs of consecutive
//     offsets of a partition, ordered by when they were handled, never interleave with
//     another member's run of that partition;
//   - offsets resume: every record produced is consumed, and a record is consumed again only
//     if no commit past it had been acknowledged before (duplicates only within the
//     uncommitted window).
func TestKIP848RebalancesAcrossKill9s(t *testing.T) {
	n := startInlet(t, "--group-consumer-heartbeat-interval-ms", "200", "--group-consumer-session-timeout-ms", "10000")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, group, partitions = "k848-chaos", "k848-chaos-g", 6
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 5000
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}
	if resp, err := ct.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %v", resp, err)
	}
	// A producer writes a record to every partition every 10 ms throughout, kills included;
	// acked is what the node acknowledged.
	prod, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var ackMu sync.Mutex
	acked := map[string]bool{}
	prodCtx, stopProducing := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; prodCtx.Err() == nil; i++ {
			var recs []*kgo.Record
			for p := range int32(partitions) {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("v-%d-%d", i, p))})
			}
			for _, r := range prod.ProduceSync(prodCtx, recs...) {
				if r.Err == nil {
					ackMu.Lock()
					acked[string(r.Record.Value)] = true
					ackMu.Unlock()
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	// events is every record handled and every commit acknowledged, in one order (seq).
	type event struct {
		member    string
		partition int32
		offset    int64 // the record's; for a commit, the offset committed (the next to read)
		value     string
		commit    bool
	}
	var mu sync.Mutex
	var events []event
	type member struct {
		name string
		cl   *kgo.Client
		stop context.CancelFunc
		done chan struct{}
	}
	start := func(name string) *member {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ServerSideBalancer(), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		pctx, stop := context.WithCancel(ctx)
		m := &member{name: name, cl: cl, stop: stop, done: make(chan struct{})}
		go func() {
			defer close(m.done)
			for {
				fs := cl.PollFetches(pctx)
				if fs.IsClientClosed() || pctx.Err() != nil {
					cl.AllowRebalance()
					return
				}
				next := map[int32]int64{}
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					events = append(events, event{member: name, partition: r.Partition, offset: r.Offset, value: string(r.Value)})
					next[r.Partition] = r.Offset + 1
				})
				mu.Unlock()
				if len(next) > 0 {
					if err := cl.CommitUncommittedOffsets(pctx); err == nil {
						mu.Lock()
						for p, o := range next {
							events = append(events, event{member: name, partition: p, offset: o, commit: true})
						}
						mu.Unlock()
					}
				}
				cl.AllowRebalance()
			}
		}()
		return m
	}
	leave := func(m *member) {
		m.stop() // the poll loop ends after its batch (and its commit)
		<-m.done
		m.cl.Close() // leaves the group (member epoch -1)
	}
	members := map[string]*member{"A": start("A"), "B": start("B")}
	defer func() {
		for _, m := range members {
			leave(m)
		}
	}()
	time.Sleep(500 * time.Millisecond)

	// Each round: more records, a join or a leave, and a kill while the group rebalances.
	steps := []struct{ join, leave string }{{join: "C"}, {leave: "A"}, {join: "D"}, {leave: "B"}}
	for i, s := range steps {
		time.Sleep(300 * time.Millisecond)
		if s.join != "" {
			members[s.join] = start(s.join)
		} else {
			leave(members[s.leave])
			delete(members, s.leave)
		}
		time.Sleep(time.Duration(50+100*i) * time.Millisecond)
		n.kill()
		n.restart()
	}
	time.Sleep(300 * time.Millisecond)
	stopProducing()
	<-prodDone

	// Every record acknowledged is consumed.
	ackMu.Lock()
	defer ackMu.Unlock()
	for {
		mu.Lock()
		seen := map[string]bool{}
		for _, e := range events {
			if !e.commit {
				seen[e.value] = true
			}
		}
		mu.Unlock()
		missing := 0
		for v := range acked {
			if !seen[v] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records acknowledged never consumed", missing, len(acked))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range members {
		leave(m)
	}
	members = nil

	mu.Lock()
	defer mu.Unlock()
	// Runs of consecutive offsets per member and partition, as [first, last] event index.
	type run struct {
		member      string
		first, last int
		from, to    int64
	}
	runs := map[int32][]*run{}
	open := map[[2]string]*run{}
	committed := map[int32]int64{} // acknowledged commits so far
	consumedAt := map[[2]int64]int{}
	dups := 0
	for i, e := range events {
		if e.commit {
			committed[e.partition] = max(committed[e.partition], e.offset)
			continue
		}
		k := [2]int64{int64(e.partition), e.offset}
		if _, again := consumedAt[k]; again {
			dups++
			if e.offset < committed[e.partition] {
				t.Errorf("partition %d offset %d consumed again by %s after a commit to %d was acknowledged", e.partition, e.offset, e.member, committed[e.partition])
			}
		}
		consumedAt[k] = i
		key := [2]string{e.member, fmt.Sprint(e.partition)}
		if r := open[key]; r != nil && r.to+1 == e.offset {
			r.to, r.last = e.offset, i
			continue
		}
		r := &run{member: e.member, first: i, last: i, from: e.offset, to: e.offset}
		open[key] = r
		runs[e.partition] = append(runs[e.partition], r)
	}
	for p, rs := range runs {
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.member != b.member && a.first < b.last && b.first < a.last {
					t.Errorf("partition %d consumed by %s (offsets %d-%d) and %s (offsets %d-%d) at once", p, a.member, a.from, a.to, b.member, b.from, b.to)
				}
			}
		}
	}
	owners := map[int32]map[string]bool{}
	for p, rs := range runs {
		owners[p] = map[string]bool{}
		for _, r := range rs {
			owners[p][r.member] = true
		}
	}
	nruns := 0
	for _, rs := range runs {
		nruns += len(rs)
	}
	t.Logf("%d records acknowledged, %d handled (%d of them again), %d runs of consecutive offsets; members per partition: %v", len(acked), len(consumedAt)+dups, dups, nruns, owners)
}
