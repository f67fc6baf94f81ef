package e2e

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// metricValue is the value of the unlabelled counter or gauge, or the sum and count of the
// unlabelled histogram, called name in b's registry; ok is false when there is none.
func (b *broker) metricValue(name string) (value, count float64, ok bool) {
	b.t.Helper()
	mfs, err := b.m.Registry.Gather()
	if err != nil {
		b.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		if h := m.GetHistogram(); h != nil {
			return h.GetSampleSum(), float64(h.GetSampleCount()), true
		}
		if g := m.GetGauge(); g != nil {
			return g.GetValue(), 0, true
		}
		return m.GetCounter().GetValue(), 0, true
	}
	return 0, 0, false
}

// TestTailFetchNotWokenByOtherPartitions guards the per-partition wake-up: a fetch parked at
// the end of partition 0 is not woken, and builds no answer again, while partition 1 takes
// commit after commit; the first write to partition 0 wakes it once.
func TestTailFetchNotWokenByOtherPartitions(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "tail-other"
	b.createTopic(topic, 2)
	prod := dialRaw(t, b.addr)
	cons := dialRaw(t, b.addr)
	req := fetchReq(12, topic, 0, 0, 10000, 1, 1<<20, 1<<20)
	corr := cons.send(req)
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		gotCorr, body, err := cons.readFrame(15 * time.Second)
		if err == nil && gotCorr != corr {
			err = context.DeadlineExceeded
		}
		done <- result{body, err}
	}()
	time.Sleep(100 * time.Millisecond) // parked
	const others = 30
	for i := range others {
		if p := prod.produceOne(12, topic, 1, plainBatch(1, 1000, "elsewhere").encode()); p.ErrorCode != 0 {
			t.Fatalf("produce %d to partition 1: %d", i, p.ErrorCode)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("the fetch of partition 0 was answered after writes to partition 1 only (%v)", r.err)
	default:
	}
	woken, _, ok := b.metricValue("inlet_fetch_wakeups_total")
	if !ok {
		t.Fatal("no inlet_fetch_wakeups_total")
	}
	if woken != 0 {
		t.Errorf("%v wake-ups of the fetch parked on partition 0 after %d commits to partition 1; want 0", woken, others)
	}
	if p := prod.produceOne(12, topic, 0, plainBatch(2, 1000, "here").encode()); p.ErrorCode != 0 {
		t.Fatalf("produce to partition 0: %d", p.ErrorCode)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("fetch: %v", r.err)
	}
	resp, err := decodeResponse(req, r.body)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if bs := parseBatches(t, p.RecordBatches); len(bs) != 1 || bs[0].baseOffset != 0 || len(bs[0].records) != 2 {
		t.Errorf("woken fetch returned %+v; want the batch of 2 at offset 0", bs)
	}
	if woken, _, _ = b.metricValue("inlet_fetch_wakeups_total"); woken != 1 {
		t.Errorf("%v wake-ups after one write to partition 0; want 1", woken)
	}
}

// TestTailFetchAnsweredPromptlyAfterProduce guards the tail's latency over real TCP with kgo:
// a consumer following the end of partition 0 (kgo's long polls, MaxWait 5 s) gets each
// record within a small bound of its produce being acknowledged, while other partitions take
// writes too. It logs where the time went: the produce round trip, the group commit and its
// fsync (the broker's histograms), and the receive after the acknowledgement.
func TestTailFetchAnsweredPromptlyAfterProduce(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "tail-prompt"
	const partitions = 4
	b.createTopic(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.FetchMaxWait(5*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtEnd()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// The consumer's first fetch resolves the end offset; wait until it is parked there.
	if err := cons.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	recv := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			n := 0
			fs.EachRecord(func(*kgo.Record) { n++ })
			for range n {
				recv <- now
			}
		}
	}()
	commits0, _, _ := b.metricValue("inlet_group_commits_total")
	gc0, gcN0, _ := b.metricValue("inlet_group_commit_duration_seconds")
	fs0, fsN0, _ := b.metricValue("inlet_fsync_duration_seconds")
	const rounds = 25
	var acks, after, e2e []time.Duration
	for i := range rounds {
		// A write to another partition first: its commit must not delay or disturb the tail.
		other := &kgo.Record{Partition: int32(1 + i%(partitions-1)), Value: []byte("other")}
		if err := prod.ProduceSync(ctx, other).FirstErr(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("tail")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		var got time.Time
		select {
		case got = <-recv:
		case <-time.After(3 * time.Second):
			t.Fatalf("record %d not received 3 s after its produce was acknowledged (MaxWait 5 s)", i)
		}
		acks = append(acks, acked.Sub(start))
		after = append(after, got.Sub(acked))
		e2e = append(e2e, got.Sub(start))
	}
	commits, _, _ := b.metricValue("inlet_group_commits_total")
	gc, gcN, _ := b.metricValue("inlet_group_commit_duration_seconds")
	fsy, fsN, _ := b.metricValue("inlet_fsync_duration_seconds")
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	mean := func(sum, n float64) time.Duration {
		if n == 0 {
			return 0
		}
		return time.Duration(sum / n * float64(time.Second))
	}
	t.Logf("%d records, %v group commits: produce round trip median %v; group commit (build to fsync) mean %v; fsync mean %v; receive after the acknowledgement median %v, max %v; produce to receive median %v, max %v",
		rounds, commits-commits0, med(acks), mean(gc-gc0, gcN-gcN0), mean(fsy-fs0, fsN-fsN0),
		med(after), slices.Max(after), med(e2e), slices.Max(e2e))
	// The fetch is woken as the high watermark is published, before the produce is answered:
	// its reply is about one reply's write behind the acknowledgement, not a timer or MaxWait.
	if m := med(after); m > 50*time.Millisecond {
		t.Errorf("records received a median %v after their produce was acknowledged; want at most 50ms", m)
	}
}

// BenchmarkProduceBesideParkedFetches is a produce round trip (one small batch to partition 0,
// one request in flight) while 200 fetches are parked on 200 other partitions that take no
// writes: what each commit costs the broker in waking fetches it has nothing for. The
// broker's CPU is reported as cpu-µs/op (its process runs in the benchmark's).
func BenchmarkProduceBesideParkedFetches(b *testing.B) {
	const parked = 200
	br := startBroker(b, func(c *server.Config) { c.DefaultPartitions = parked + 1 })
	const topic = "parked"
	br.createTopic(topic, parked+1)
	for i := range parked {
		rc := dialRaw(b, br.addr)
		rc.send(fetchReq(12, topic, int32(1+i), 0, 60000, 1, 1<<20, 1<<20))
	}
	time.Sleep(300 * time.Millisecond) // parked
	prod := dialRaw(b, br.addr)
	batch := plainBatch(1, 1000, "p").encode()
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		if p := prod.produceOne(12, topic, 0, batch); p.ErrorCode != 0 {
			b.Fatalf("produce: %d", p.ErrorCode)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestParkedFetchAnsweredWhenItsTopicIsDeleted: a long poll parked with a 20 s wait on a topic
// that is then deleted is answered UNKNOWN_TOPIC_OR_PARTITION at once, not when its wait runs
// out.
func TestParkedFetchAnsweredWhenItsTopicIsDeleted(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "parked-then-deleted"
	b.createTopic(topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, -1, 20000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	type answer struct {
		resp *kmsg.FetchResponse
		err  error
		at   time.Time
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := req.RequestWith(ctx, cl)
		got <- answer{resp, err, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // parked by now
	deleted := time.Now()
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if wait := a.at.Sub(deleted); wait > 3*time.Second {
		t.Fatalf("the parked fetch was answered %v after the deletion", wait)
	}
	if ec := a.resp.Topics[0].Partitions[0].ErrorCode; ec != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("error code %d, want UNKNOWN_TOPIC_OR_PARTITION", ec)
	}
}
