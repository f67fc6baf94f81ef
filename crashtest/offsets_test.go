package crashtest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCommittedOffsetsSurviveKill9: a group's committed offsets are synced before the
// OffsetCommit reply, so every commit that was answered is still there after kill -9, and a
// group consumer resumes from it instead of rereading.
func TestCommittedOffsetsSurviveKill9(t *testing.T) {
	n := startInlet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	const topic = "offsets-kill"
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var records []*kgo.Record
	for i := 0; i < 400; i++ {
		records = append(records, &kgo.Record{Topic: topic, Partition: int32(i % 4), Value: []byte{byte(i)}})
	}
	cl.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	// Commit a different offset per partition, then kill the node before anything else
	// could have flushed it.
	cl, err = kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	adm = kadm.NewClient(cl)
	want := kadm.Offsets{}
	for p := int32(0); p < 4; p++ {
		want.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(10 * (p + 1)), LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, "survivors", want)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v / %v", err, resp.Error())
	}
	cl.Close()
	n.kill()
	n.restart()

	cl, err = kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	got, err := adm.FetchOffsets(ctx, "survivors")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ {
		o, ok := got.Lookup(topic, p)
		if !ok || o.Err != nil || o.At != int64(10*(p+1)) {
			t.Errorf("partition %d after kill -9: %+v (found %v), want offset %d", p, o, ok, 10*(p+1))
		}
	}

	// A group consumer resumes at the committed offsets: the first record it sees on each
	// partition is the committed one.
	cons, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.ConsumerGroup("survivors"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	first := map[int32]int64{}
	for len(first) < 4 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if _, seen := first[r.Partition]; !seen {
				first[r.Partition] = r.Offset
			}
		})
	}
	for p := int32(0); p < 4; p++ {
		if first[p] != int64(10*(p+1)) {
			t.Errorf("partition %d: group consumer started at %d, want %d", p, first[p], 10*(p+1))
		}
	}
}
