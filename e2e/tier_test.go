package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/batchlog"
	"inlet/objstore"
	"inlet/objstore/objtest"
	"inlet/server"
	"inlet/tier"
)

// Tiered topics end to end, on a real S3 server (versitygw on loopback) or on objstore's
// in-memory bucket where a test injects failures.

const tierTopic = "tiered"

// tsBase stamps the test records: an hour ago, well inside the default retention.ms (7 days),
// so that only the local bounds drop anything.
var tsBase = time.Now().Add(-time.Hour).UnixMilli()

// tierConfig is a remote tier that cuts small objects and runs its passes often, so that a
// test moves several objects' worth of data in seconds.
func tierConfig(b objstore.Bucket) *tier.Config {
	return &tier.Config{Bucket: b, ObjectBytes: 128 << 10, UploadInterval: 300 * time.Millisecond,
		PassInterval: 50 * time.Millisecond, RetentionInterval: 100 * time.Millisecond, ChunkBytes: 32 << 10,
		CallTimeout: 5 * time.Second, RetryMax: 500 * time.Millisecond}
}

// versityBucket starts versitygw and opens its bucket with the SDK, credentials from the
// environment as the node takes them.
func versityBucket(t *testing.T, prefix string) (*objtest.Server, objstore.Bucket) {
	srv := objtest.StartVersity(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := objstore.OpenS3(ctx, srv.Config(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return srv, b
}

// tieredServerConfig runs local retention often, as the tier's passes run.
func tieredServerConfig() server.Config {
	cfg := testServerConfig()
	cfg.Upkeep.RetentionCheckInterval = 100 * time.Millisecond
	return cfg
}

func startTieredBroker(t *testing.T, bucket objstore.Bucket) *broker {
	t.Helper()
	b := &broker{t: t, dir: t.TempDir(), cfg: tieredServerConfig(), remote: tierConfig(bucket)}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func createTieredTopic(t *testing.T, b *broker, partitions int, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(tierClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all := map[string]*string{"remote.storage.enable": kadm.StringPtr("true"), "local.retention.bytes": kadm.StringPtr("262144")}
	for k, v := range configs {
		all[k] = v
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), 1, all, tierTopic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", tierTopic, err, resp.Err)
	}
}

func tierClient(t *testing.T, b *broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceNumbered writes records n0..n0+count-1 to partition p, each valued with its number
// and stamped with tsBase plus its number (ms), and waits for every acknowledgement.
func produceNumbered(t *testing.T, cl *kgo.Client, p int32, n0, count int, tsBase int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pad := make([]byte, 90)
	results := make(chan error, count)
	for i := n0; i < n0+count; i++ {
		v := append([]byte(fmt.Sprintf("%09d:", i)), pad...)
		cl.Produce(ctx, &kgo.Record{Topic: tierTopic, Partition: p, Value: v, Timestamp: time.UnixMilli(tsBase + int64(i))},
			func(_ *kgo.Record, err error) { results <- err })
	}
	for i := 0; i < count; i++ {
		if err := <-results; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// readAll reads partition p of the tiered topic from offset 0 up to the record at offset last
// and returns the record numbers in the order read, failing on a record read twice or an
// offset out of order.
func readAll(t *testing.T, b *broker, p int32, last int64, opts ...kgo.Opt) []int {
	t.Helper()
	cl := tierClient(t, b, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tierTopic: {p: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxPartitionBytes(64 << 10)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []int
	next := int64(-1)
	for next < last {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("partition %d: read %d records, up to offset %d of %d: %v", p, len(out), next, last, ctx.Err())
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch error (retried): %v", e.Err)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= next {
				t.Fatalf("partition %d: offset %d read after %d", p, r.Offset, next)
			}
			next = r.Offset
			n, err := strconv.Atoi(string(r.Value[:9]))
			if err != nil {
				t.Fatalf("record %d: %q", r.Offset, r.Value)
			}
			out = append(out, n)
			if r.Offset >= last {
				done = true
			}
		})
		if done {
			break
		}
	}
	return out
}

func waitFor(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tieredPartition(t *testing.T, b *broker, p int32) *batchlog.Partition {
	tp, ok := b.blog.Topic(tierTopic)
	if !ok {
		t.Fatal("no tiered topic")
	}
	return tp.Partitions[p]
}

// localBytes is the batch data partition p still holds locally.
func localBytes(t *testing.T, b *broker, p *batchlog.Partition) int64 {
	var n int64
	if err := b.blog.IndexedBatches(p, p.LocalLogStartOffset(), p.HighWatermark(), func(_ int64, size int) bool {
		n += int64(size)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func listOffset(t *testing.T, cl *kgo.Client, p int32, ts int64) (int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := listOffsetsReq(8, tierTopic, p, ts).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	op := resp.Topics[0].Partitions[0]
	if op.ErrorCode != 0 {
		t.Fatalf("ListOffsets %d: error %d", ts, op.ErrorCode)
	}
	return op.Offset, op.Timestamp
}

// TestTieredTopicOnVersity: records produced to a tiered topic past several local bounds are
// uploaded; the local data follows local.retention.bytes; a consumer from offset 0 reads each
// record once, across both tiers; ListOffsets earliest, earliest-local and by timestamp span
// both tiers.
func TestTieredTopicOnVersity(t *testing.T) {
	_, bucket := versityBucket(t, "node-1/")
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 2, nil)
	cl := tierClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const perPart = 12000 // 100-byte values: about 1.4 MiB a partition, 5 local bounds
	for p := int32(0); p < 2; p++ {
		for round := 0; round < 4; round++ {
			produceNumbered(t, cl, p, round*perPart/4, perPart/4, tsBase)
		}
	}
	for p := int32(0); p < 2; p++ {
		part := tieredPartition(t, b, p)
		waitFor(t, fmt.Sprintf("partition %d uploaded and trimmed locally", p), 30*time.Second, func() bool {
			return b.tier.UploadedEnd(part) == part.HighWatermark() && part.LocalLogStartOffset() > int64(perPart/2)
		})
		if local := localBytes(t, b, part); local > 262144+2*(128<<10) {
			t.Errorf("partition %d keeps %d bytes locally; local.retention.bytes is 262144", p, local)
		}
		if part.LogStartOffset() != 0 {
			t.Errorf("partition %d: log start %d, want 0 (retention.bytes is unbounded)", p, part.LogStartOffset())
		}
		got := readAll(t, b, p, part.HighWatermark()-1)
		if len(got) != perPart {
			t.Fatalf("partition %d: read %d records, want %d", p, len(got), perPart)
		}
		for i, n := range got {
			if n != i {
				t.Fatalf("partition %d: record %d is number %d", p, i, n)
			}
		}
		if off, _ := listOffset(t, cl, p, -2); off != 0 {
			t.Errorf("earliest: %d", off)
		}
		if off, _ := listOffset(t, cl, p, -4); off != part.LocalLogStartOffset() {
			t.Errorf("earliest-local: %d, want %d", off, part.LocalLogStartOffset())
		}
		if off, ts := listOffset(t, cl, p, -3); off != int64(perPart)-1 || ts != tsBase+int64(perPart)-1 {
			t.Errorf("partition %d: max timestamp at %d (%d), want the last record", p, off, ts)
		}
		for _, n := range []int64{10, 4321, int64(perPart) - 5} { // remote, remote, local
			off, ts := listOffset(t, cl, p, tsBase+n)
			if off != n || ts != tsBase+n {
				t.Errorf("partition %d: by timestamp %d: offset %d at %d, want %d", p, tsBase+n, off, ts, n)
			}
		}
	}
	st := b.tier.Stats()
	if st.UploadedObjects < 4 || st.ReadBytes == 0 || st.LagBytes != 0 {
		t.Errorf("tier stats %+v", st)
	}
}

// TestTieredTopicTransactionsAcrossTiers: committed and aborted transactions whose batches end
// up in the remote tier are read by a read_committed consumer as Kafka's: the aborted ones
// dropped, the committed ones kept, once each.
func TestTieredTopicTransactionsAcrossTiers(t *testing.T) {
	_, bucket := versityBucket(t, "txn/")
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	txn := tierClient(t, b, kgo.TransactionalID("tiered-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := 0
	n := 0
	for round := 0; round < 7; round++ { // rounds 0, 2, 4 and 6 commit: the last one does
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2000; i++ {
			v := append([]byte(fmt.Sprintf("%09d:", n)), make([]byte, 90)...)
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: tierTopic, Value: v, Timestamp: time.UnixMilli(tsBase + int64(n))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			n++
		}
		commit := round%2 == 0
		if commit {
			want += 2000
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	part := tieredPartition(t, b, 0)
	waitFor(t, "uploaded and trimmed locally", 30*time.Second, func() bool {
		return b.tier.UploadedEnd(part) == part.HighWatermark() && part.LocalLogStartOffset() > part.HighWatermark()/2
	})
	// The last record is the one before the last round's commit marker.
	got := readAll(t, b, 0, part.HighWatermark()-2, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if len(got) != want {
		t.Fatalf("read_committed read %d records, want %d", len(got), want)
	}
	for i, v := range got {
		round := v / 2000
		if round%2 != 0 || (i > 0 && v <= got[i-1]) {
			t.Fatalf("record %d is number %d (round %d)", i, v, round)
		}
	}
}

// TestTierOutageKeepsProducing: with the bucket down, produce goes on, nothing is dropped
// locally that is not uploaded, the tier says it is behind; once the bucket is back the tier
// catches up and the local data is trimmed.
func TestTierOutageKeepsProducing(t *testing.T) {
	bucket := objstore.NewMemory()
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	cl := tierClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	part := tieredPartition(t, b, 0)
	bucket.SetDown(fmt.Errorf("injected: 503 Service Unavailable"))
	for round := 0; round < 4; round++ {
		produceNumbered(t, cl, 0, round*2500, 2500, tsBase)
	}
	time.Sleep(500 * time.Millisecond) // several passes, and local retention, with the bucket down
	if part.LocalLogStartOffset() != 0 || b.tier.UploadedEnd(part) != 0 {
		t.Fatalf("bucket down: local start %d, uploaded end %d; nothing may go unuploaded", part.LocalLogStartOffset(), b.tier.UploadedEnd(part))
	}
	st := b.tier.Stats()
	if st.Healthy || st.LagBytes == 0 || st.Errors == 0 {
		t.Fatalf("bucket down, yet the tier says %+v", st)
	}
	bucket.SetDown(nil)
	waitFor(t, "caught up after the outage", 30*time.Second, func() bool {
		return b.tier.UploadedEnd(part) == part.HighWatermark() && part.LocalLogStartOffset() > 0
	})
	got := readAll(t, b, 0, part.HighWatermark()-1)
	if len(got) != 10000 {
		t.Fatalf("read %d records, want 10000", len(got))
	}
	for i, n := range got {
		if n != i {
			t.Fatalf("record %d is number %d", i, n)
		}
	}
}

// TestTierOutageOnVersity: the S3 server itself goes away for a while under load and comes
// back on the same port and directory: produce goes on, nothing unuploaded is dropped, and the
// tier catches up.
func TestTierOutageOnVersity(t *testing.T) {
	s3, bucket := versityBucket(t, "outage/")
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 1, nil)
	cl := tierClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	part := tieredPartition(t, b, 0)
	produceNumbered(t, cl, 0, 0, 2000, tsBase)
	waitFor(t, "first objects", 30*time.Second, func() bool { return b.tier.UploadedEnd(part) == 2000 })
	s3.Stop()
	for round := 1; round < 5; round++ {
		produceNumbered(t, cl, 0, round*2000, 2000, tsBase)
	}
	time.Sleep(time.Second)
	if end := b.tier.UploadedEnd(part); end != 2000 || part.LocalLogStartOffset() > 2000 {
		t.Fatalf("server down: uploaded end %d, local start %d", end, part.LocalLogStartOffset())
	}
	if st := b.tier.Stats(); st.Healthy || st.LagBytes == 0 {
		t.Fatalf("server down, yet the tier says %+v", st)
	}
	s3.Restart()
	waitFor(t, "caught up after the outage", 60*time.Second, func() bool {
		return b.tier.UploadedEnd(part) == part.HighWatermark() && part.LocalLogStartOffset() > 2000
	})
	got := readAll(t, b, 0, part.HighWatermark()-1)
	for i, n := range got {
		if n != i {
			t.Fatalf("record %d is number %d", i, n)
		}
	}
	if len(got) != 10000 {
		t.Fatalf("read %d records", len(got))
	}
}

// TestRestoreFromBucket: a node whose data directory is lost is rebuilt from the bucket with
// the tiered topic's catalog and every uploaded record; what was not uploaded (the tail
// written while the tier was stopped) and the group offsets are what is missing, exactly.
func TestRestoreFromBucket(t *testing.T) {
	_, bucket := versityBucket(t, "restore/")
	b := startTieredBroker(t, bucket)
	createTieredTopic(t, b, 2, map[string]*string{"retention.ms": kadm.StringPtr("-1")})
	cl := tierClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const uploaded, tail = 6000, 700
	for p := int32(0); p < 2; p++ {
		produceNumbered(t, cl, p, 0, uploaded, tsBase)
	}
	for p := int32(0); p < 2; p++ {
		part := tieredPartition(t, b, p)
		waitFor(t, "everything uploaded", 30*time.Second, func() bool { return b.tier.UploadedEnd(part) == uploaded })
	}
	b.tier.Close() // no more uploads: what follows stays local only
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: tierTopic, Partition: 0, At: 123})
	if _, err := adm.CommitOffsets(ctx, "restore-group", offs); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		produceNumbered(t, cl, p, uploaded, tail, tsBase)
	}
	cl.Close()
	b.stop()
	if err := os.RemoveAll(b.dir); err != nil {
		t.Fatal(err)
	}

	r := &broker{t: t, dir: t.TempDir(), cfg: tieredServerConfig(), remote: tierConfig(bucket), restore: true}
	r.start()
	t.Cleanup(r.stop)
	tp, ok := r.blog.Topic(tierTopic)
	if !ok || len(tp.Partitions) != 2 || tp.Configs["remote.storage.enable"] != "true" || tp.Configs["retention.ms"] != "-1" {
		t.Fatalf("restored topic: %+v", tp)
	}
	for p := int32(0); p < 2; p++ {
		part := tp.Partitions[p]
		if part.HighWatermark() != uploaded || part.LogStartOffset() != 0 || part.LocalLogStartOffset() != uploaded {
			t.Fatalf("partition %d restored at hw %d, log start %d, local start %d", p, part.HighWatermark(), part.LogStartOffset(), part.LocalLogStartOffset())
		}
		got := readAll(t, r, p, uploaded-1)
		if len(got) != uploaded {
			t.Fatalf("partition %d: read %d records of %d uploaded", p, len(got), uploaded)
		}
	}
	rcl := tierClient(t, r, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceNumbered(t, rcl, 0, uploaded, 10, tsBase)
	if hw := tp.Partitions[0].HighWatermark(); hw != uploaded+10 {
		t.Fatalf("new writes: high watermark %d, want %d", hw, uploaded+10)
	}
	fetched, err := kadm.NewClient(rcl).FetchOffsets(ctx, "restore-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup(tierTopic, 0); ok && o.At >= 0 {
		t.Fatalf("group offsets are not tiered, yet %d came back", o.At)
	}
}
