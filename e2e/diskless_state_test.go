package e2e

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/diskless"
	"inlet/groups"
	"inlet/meta"
	"inlet/objstore"
	"inlet/server"
)

// withBucketGroups wires the group coordinator's store as cmd/inlet does on a node with the
// diskless commit log: offset changes go to the bucket before they are answered.
func withBucketGroups(cfg *server.Config) {
	c := cfg.Diskless.(*diskless.Committer)
	cfg.GroupStore = func(m *meta.Store) groups.Store { return c.GroupStore(m) }
}

// TestDisklessGroupOffsetsComeBackFromTheBucket: a franz-go consumer group commits on a
// diskless topic; the node is closed and its data directory deleted; a node restored from the
// bucket answers OffsetFetch with the last commits, and the group resumes from them. A commit
// is not answered before its commit object is PUT, and not answered success while the bucket
// is down.
func TestDisklessGroupOffsetsComeBackFromTheBucket(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false, withBucketGroups)
	addr := n.addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(tierClient(t, &broker{addr: addr}))
	if r, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, "d"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	pc := tierClient(t, &broker{addr: addr}, kgo.DefaultProduceTopic("d"))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := pc.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(0, 30)

	// The group reads 30 records and commits them.
	consume := func(addr string, want int) map[string]bool {
		cl := tierClient(t, &broker{addr: addr}, kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("d"),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		seen := map[string]bool{}
		for len(seen) < want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", len(seen), want)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		began := time.Now()
		bucket.SetDelay(150 * time.Millisecond)
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		bucket.SetDelay(0)
		if took := time.Since(began); took < 150*time.Millisecond {
			t.Fatalf("commit answered after %v, before its PUT (150 ms) could land", took)
		}
		return seen
	}
	if got := consume(addr, 30); len(got) != 30 {
		t.Fatalf("%d records", len(got))
	}
	before, err := adm.FetchOffsets(ctx, "cg")
	if err != nil || before.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, before.Error())
	}
	var total int64
	before.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 30 {
		t.Fatalf("committed offsets sum to %d, want 30", total)
	}

	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), addr, true, withBucketGroups)

	after, err := adm.FetchOffsets(ctx, "cg")
	if err != nil || after.Error() != nil {
		t.Fatalf("fetch offsets after the restore: %v %v", err, after.Error())
	}
	before.Each(func(o kadm.OffsetResponse) {
		if a, ok := after.Lookup(o.Topic, o.Partition); !ok || a.At != o.At {
			t.Fatalf("%s %d: committed %d, restored %d (%v)", o.Topic, o.Partition, o.At, a.At, ok)
		}
	})
	// The group resumes where it committed: it reads only what came after.
	produce(30, 36)
	got := consume(r.addr, 6)
	for v := range got {
		if i, _ := strconv.Atoi(v); i < 30 {
			t.Fatalf("the group read record %s again after the restore", v)
		}
	}

	// A commit while the bucket is down is not answered success, and not served.
	bucket.SetDown(errors.New("injected: bucket down"))
	defer bucket.SetDown(nil) // before the node stops (t.Cleanup): its queue lands
	down := kadm.Offsets{}
	down.Add(kadm.Offset{Topic: "d", Partition: 0, At: 1000, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "cg", down)
	if err == nil && resp.Error() == nil {
		t.Fatal("an offset commit with the bucket down was answered success")
	}
	if o, err := adm.FetchOffsets(ctx, "cg"); err != nil || o.Error() != nil {
		t.Fatal(err)
	} else if r, _ := o.Lookup("d", 0); r.At == 1000 {
		t.Fatal("an offset the bucket does not hold is served")
	}
}
