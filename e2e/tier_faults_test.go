package e2e

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/objstore"
)

// The remote tier's failure paths and deletions, on objstore's in-memory bucket.

func tieredProducer(t *testing.T, b *broker) *kgo.Client {
	return tierClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
}

// waitTiered waits until partition 0 of the tiered topic is uploaded whole and its local
// start has passed half of it.
func waitTiered(t *testing.T, b *broker) {
	t.Helper()
	part := tieredPartition(t, b, 0)
	waitFor(t, "uploaded and trimmed locally", 30*time.Second, func() bool {
		return b.tier.UploadedEnd(part) == part.HighWatermark() && part.LocalLogStartOffset() > part.HighWatermark()/2
	})
}

// objectKeys are the bucket's object keys (not the descriptions).
func objectKeys(m *objstore.Memory) []string {
	var out []string
	for _, k := range m.Keys() {
		if !strings.HasSuffix(k, ".json") {
			out = append(out, k)
		}
	}
	return out
}

// TestTierOrphansAndLostRepliesLeaveOneCopy: an object no record names (a crash cut its upload
// short) is deleted at start; a PUT whose reply is lost (it took effect) is found on the next
// try and written once; the bucket ends holding exactly the recorded objects.
func TestTierOrphansAndLostRepliesLeaveOneCopy(t *testing.T) {
	bucket := objstore.NewMemory()
	orphan := "gone/00000000000000000000000000000001/0/00000000000000000000-00000000000000000010"
	if err := bucket.Put(context.Background(), orphan, bytes.NewReader([]byte("x")), 1); err != nil {
		t.Fatal(err)
	}
	bucket.LoseNextReply(objstore.OpPut, 2, errors.New("injected: connection reset after the PUT"))
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	produceNumbered(t, tieredProducer(t, b), 0, 0, 10000, tsBase)
	waitTiered(t, b)
	for _, k := range bucket.Keys() {
		if k == orphan {
			t.Fatal("the orphan is still there")
		}
	}
	st := b.tier.Stats()
	if got := len(objectKeys(bucket)); int64(got) != st.RemoteObjects {
		t.Fatalf("bucket holds %d objects, the manifest %d", got, st.RemoteObjects)
	}
	if st.OrphansDeleted < 1 {
		t.Fatalf("stats %+v", st)
	}
	got := readAll(t, b, 0, 9999)
	for i, n := range got {
		if n != i {
			t.Fatalf("record %d is number %d", i, n)
		}
	}
}

// TestTierRemoteReadFailuresAreRetried: a ranged GET that fails answers the fetch
// KAFKA_STORAGE_ERROR, which the consumer retries: it still reads every record once.
func TestTierRemoteReadFailuresAreRetried(t *testing.T) {
	bucket := objstore.NewMemory()
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	produceNumbered(t, tieredProducer(t, b), 0, 0, 10000, tsBase)
	waitTiered(t, b)
	bucket.FailNext(objstore.OpReadAt, 3, errors.New("injected: 500 Internal Error"))
	got := readAll(t, b, 0, 9999)
	if len(got) != 10000 {
		t.Fatalf("read %d records", len(got))
	}
	for i, n := range got {
		if n != i {
			t.Fatalf("record %d is number %d", i, n)
		}
	}
	if st := b.tier.Stats(); st.ReadErrors < 1 {
		t.Fatalf("no read failed: %+v", st)
	}
}

// TestTierTotalRetentionDeletesObjects: retention.bytes counts both tiers: the oldest objects
// go, the log start moves past them, and a consumer from the earliest offset reads on from it.
func TestTierTotalRetentionDeletesObjects(t *testing.T) {
	bucket := objstore.NewMemory()
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, map[string]*string{"retention.bytes": kadm.StringPtr("600000")})
	produceNumbered(t, tieredProducer(t, b), 0, 0, 14000, tsBase) // about 1.6 MB
	part := tieredPartition(t, b, 0)
	waitFor(t, "objects deleted by retention", 30*time.Second, func() bool {
		return b.tier.Stats().DeletedObjects > 0 && b.tier.UploadedEnd(part) == part.HighWatermark()
	})
	start := part.LogStartOffset()
	if start == 0 || start > part.LocalLogStartOffset() {
		t.Fatalf("log start %d, local start %d", start, part.LocalLogStartOffset())
	}
	st := b.tier.Stats()
	if total := st.RemoteBytes; total > 600000+400000 {
		t.Fatalf("the remote tier keeps %d bytes; retention.bytes is 600000", total)
	}
	cl := tierClient(t, b)
	if off, _ := listOffset(t, cl, 0, -2); off != start {
		t.Fatalf("earliest %d, log start %d", off, start)
	}
	// A consumer at the earliest offset reads from there to the end, once each.
	rc := tierClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tierTopic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := int(start)
	for want < 14000 {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read up to %d: %v", want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < start {
				t.Fatalf("offset %d below the log start %d", r.Offset, start)
			}
			if int(r.Offset) != want {
				t.Fatalf("offset %d, want %d", r.Offset, want)
			}
			want++
		})
	}
	if n := len(objectKeys(bucket)); int64(n) != b.tier.Stats().RemoteObjects {
		t.Fatalf("bucket holds %d objects, the manifest %d", n, b.tier.Stats().RemoteObjects)
	}
}

// TestTierDeleteRecordsAndDeleteTopicCleanBothTiers: DeleteRecords into the remote range (inside
// its second object) moves
// the log start there and drops the objects below it; deleting the topic empties the bucket.
func TestTierDeleteRecordsAndDeleteTopicCleanBothTiers(t *testing.T) {
	bucket := objstore.NewMemory()
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	produceNumbered(t, tieredProducer(t, b), 0, 0, 10000, tsBase)
	waitTiered(t, b)
	part := tieredPartition(t, b, 0)
	before := b.tier.Stats().RemoteObjects
	keys := objectKeys(bucket)
	sort.Strings(keys)
	firstEnd, err := strconv.ParseInt(keys[0][strings.LastIndex(keys[0], "-")+1:], 10, 64)
	if err != nil || len(keys) < 3 {
		t.Fatalf("objects %v", keys)
	}
	cut := firstEnd + 10 // inside the second object: the first goes, the second stays
	adm := kadm.NewClient(tierClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: tierTopic, Partition: 0, At: cut})
	res, err := adm.DeleteRecords(ctx, offs)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	if part.LogStartOffset() != cut {
		t.Fatalf("log start %d after DeleteRecords to %d", part.LogStartOffset(), cut)
	}
	waitFor(t, "the object below the cut deleted", 10*time.Second, func() bool { return b.tier.Stats().RemoteObjects == before-1 })
	got := readAll(t, b, 0, 9999, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tierTopic: {0: kgo.NewOffset().At(cut)}}))
	if len(got) != 10000-int(cut) || got[0] != int(cut) {
		t.Fatalf("read %d records from %v", len(got), got[:1])
	}
	if _, err := adm.DeleteTopics(ctx, tierTopic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bucket emptied", 10*time.Second, func() bool {
		_ = b.tier.RunOnce(ctx, time.Now()) // the clean runs every 10 minutes on its own
		return len(bucket.Keys()) == 0
	})
}

// TestTierConfigsKafkaRefuses: remote.storage.enable with compaction, or on a node without a
// remote tier, is INVALID_CONFIG, as in Kafka.
func TestTierConfigsKafkaRefuses(t *testing.T) {
	b := startTieredBroker(t, objstore.NewMemory())
	adm := kadm.NewClient(tierClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func(adm *kadm.Client, name string, configs map[string]*string, wantMsg string) {
		t.Helper()
		resps, err := adm.CreateTopics(ctx, 1, 1, configs, name)
		if err != nil {
			t.Fatal(err)
		}
		resp := resps[name]
		if !errors.Is(resp.Err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, wantMsg) {
			t.Fatalf("%s: %v %q, want INVALID_CONFIG %q", name, resp.Err, resp.ErrMessage, wantMsg)
		}
	}
	check(adm, "compacted", map[string]*string{"remote.storage.enable": kadm.StringPtr("true"), "cleanup.policy": kadm.StringPtr("compact")},
		"only supports topics with cleanup.policy=delete")
	plain := startBroker(t, nil)
	check(kadm.NewClient(newKgo(t, plain.addr)), "nowhere", map[string]*string{"remote.storage.enable": kadm.StringPtr("true")},
		"Tiered Storage functionality is disabled")
}

// TestTierUploadsFromALogStartInsideABatch: DeleteRecords to an offset inside a batch before
// anything is uploaded; the first object starts with that batch, whole, so that once local
// retention has dropped it the records from the log start on are still read.
func TestTierUploadsFromALogStartInsideABatch(t *testing.T) {
	bucket := objstore.NewMemory()
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	bucket.SetDown(errors.New("injected: down while the records are deleted"))
	produceNumbered(t, tieredProducer(t, b), 0, 0, 10000, tsBase)
	adm := kadm.NewClient(tierClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: tierTopic, Partition: 0, At: 5001})
	if res, err := adm.DeleteRecords(ctx, offs); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	bucket.SetDown(nil)
	waitTiered(t, b)
	part := tieredPartition(t, b, 0)
	if part.LocalLogStartOffset() <= 5001 {
		t.Fatalf("local start %d: the batch holding 5001 is still local", part.LocalLogStartOffset())
	}
	got := readAll(t, b, 0, 9999, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tierTopic: {0: kgo.NewOffset().At(5001)}}))
	if len(got) != 4999 || got[0] != 5001 {
		t.Fatalf("read %d records from %v; want 4999 from 5001", len(got), got[:min(1, len(got))])
	}
}

// TestTierMaxTimestampInTheRemoteTier: ListOffsets MAX_TIMESTAMP (-3) finds the record with
// the largest timestamp when it lies in the remote tier, below the local log start.
func TestTierMaxTimestampInTheRemoteTier(t *testing.T) {
	bucket := objstore.NewMemory()
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	cl := tieredProducer(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const peak = 123
	for i := 0; i < 10000; i++ {
		ts := tsBase + int64(i)
		if i == peak {
			ts = tsBase + 50_000_000 // the newest record, early in the log
		}
		v := append([]byte(strconv.Itoa(100000000+i)), make([]byte, 90)...)
		cl.Produce(ctx, &kgo.Record{Topic: tierTopic, Partition: 0, Value: v, Timestamp: time.UnixMilli(ts)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	waitTiered(t, b)
	if part := tieredPartition(t, b, 0); part.LocalLogStartOffset() <= peak {
		t.Fatalf("local start %d: the record is still local", part.LocalLogStartOffset())
	}
	off, ts := listOffset(t, tierClient(t, b), 0, -3)
	if off != peak || ts != tsBase+50_000_000 {
		t.Fatalf("max timestamp at offset %d (%d), want %d", off, ts, peak)
	}
}
