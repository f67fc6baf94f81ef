package metrics

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless"
	"inlet/objstore"
	"inlet/tier"
)

// disklessNode is a log with a diskless committer on bucket, its metrics on m.
func disklessNode(t *testing.T, m *Metrics, bucket objstore.Bucket, restore bool, mods ...func(*diskless.Config)) (*batchlog.Log, *diskless.Committer) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	cfg := diskless.Config{Bucket: bucket, CommitInterval: 10 * time.Millisecond, Logger: quiet, Observer: m.DisklessObserver()}
	for _, mod := range mods {
		mod(&cfg)
	}
	c := diskless.New(cfg)
	l, err := batchlog.Open(batchlog.Options{Dir: t.TempDir(), MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Diskless: c, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if restore {
		if _, _, err := tier.Restore(ctx, l, l.Meta(), bucket, quiet); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Recover(ctx, l); err != nil {
		t.Fatal(err)
	}
	m.WatchDiskless(c)
	t.Cleanup(func() { l.Close(); c.Close() })
	return l, c
}

// scrape reads the value of each series named (the text format's "name value" line).
func scrape(t *testing.T, m *Metrics, names ...string) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]float64{}
	for _, name := range names {
		match := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(rec.Body.String())
		if match == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		v, err := strconv.ParseFloat(match[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = v
	}
	return out
}

// TestDisklessMetricsMove: a produce to a diskless topic, answered once its commit object is
// in the bucket, counts a PUT and its bytes and observes one commit latency; a node restored
// from that bucket on an empty disk says it read the object and replayed the batch.
func TestDisklessMetricsMove(t *testing.T) {
	bucket := objstore.NewMemory()
	m := New([]int16{0}, "test", "")
	l, c := disklessNode(t, m, bucket, false)
	tp, err := l.CreateTopic("d", 1, map[string]string{"diskless.enable": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Describe(context.Background(), tp); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, m, "inlet_diskless_puts_total", "inlet_diskless_commit_duration_seconds_count")
	if before["inlet_diskless_commit_duration_seconds_count"] != 0 {
		t.Fatalf("before any produce: %v", before)
	}
	done := completion(make(chan struct{}))
	r := &batchlog.Request{Appends: []batchlog.Append{{Partition: tp.Partitions[0], Batch: recordBatch(3), ProducerID: -1, NumRecords: 3}},
		Completion: done}
	l.Submit(r)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("produce not answered")
	}
	if r.Appends[0].Err != 0 {
		t.Fatalf("produce answered %d", r.Appends[0].Err)
	}
	after := scrape(t, m, "inlet_diskless_puts_total", "inlet_diskless_put_bytes_total", "inlet_diskless_commit_duration_seconds_count",
		"inlet_diskless_commit_duration_seconds_sum", "inlet_diskless_pending_bytes", "inlet_diskless_put_failures_total")
	if after["inlet_diskless_puts_total"] != before["inlet_diskless_puts_total"]+1 || after["inlet_diskless_put_bytes_total"] < 62 ||
		after["inlet_diskless_commit_duration_seconds_count"] != 1 || after["inlet_diskless_commit_duration_seconds_sum"] <= 0 ||
		after["inlet_diskless_pending_bytes"] != 0 || after["inlet_diskless_put_failures_total"] != 0 {
		t.Fatalf("after one produce: %v (before %v)", after, before)
	}

	m2 := New([]int16{0}, "test", "")
	disklessNode(t, m2, bucket, true)
	got := scrape(t, m2, "inlet_diskless_recover_objects", "inlet_diskless_recover_replayed_batches", "inlet_diskless_recover_duration_seconds")
	if got["inlet_diskless_recover_objects"] != 1 || got["inlet_diskless_recover_replayed_batches"] != 1 || got["inlet_diskless_recover_duration_seconds"] <= 0 {
		t.Fatalf("restored node: %v", got)
	}
}

// recordBatch is a record-batch-shaped value of n records with no producer (the log and
// the committer read only its header).
func recordBatch(n int32) []byte {
	b := make([]byte, 62)
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// completion is a produce request's answer, as the server takes it (a request with only
// Done is a restore's, which the log keeps local).
type completion chan struct{}

func (c completion) Completed(*batchlog.Request) { close(c) }

// TestDisklessCheckpointMetrics: a checkpoint of a commit log whose batches the tier covers
// (here: every batch, as if uploaded) counts one checkpoint, names its last object and counts
// the objects it deleted.
func TestDisklessCheckpointMetrics(t *testing.T) {
	m := New([]int16{0}, "test", "")
	l, c := disklessNode(t, m, objstore.NewMemory(), false, func(cfg *diskless.Config) {
		cfg.UploadedEnd = func(p *batchlog.Partition) int64 { return p.HighWatermark() }
		cfg.CheckpointInterval = time.Hour // written here by hand
	})
	tp, err := l.CreateTopic("d", 1, map[string]string{"diskless.enable": "true"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Describe(ctx, tp); err != nil {
		t.Fatal(err)
	}
	done := completion(make(chan struct{}))
	l.Submit(&batchlog.Request{Appends: []batchlog.Append{{Partition: tp.Partitions[0], Batch: recordBatch(3), ProducerID: -1, NumRecords: 3}},
		Completion: done})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("produce not answered")
	}
	n, err := c.Checkpoint(ctx)
	if err != nil || n == 0 {
		t.Fatalf("checkpoint: %d, %v", n, err)
	}
	got := scrape(t, m, "inlet_diskless_checkpoints_total", "inlet_diskless_checkpoint_last_object", "inlet_diskless_checkpoint_bytes",
		"inlet_diskless_deleted_objects_total", "inlet_diskless_checkpoint_producer_windows")
	if got["inlet_diskless_checkpoints_total"] != 1 || got["inlet_diskless_checkpoint_last_object"] != float64(n) ||
		got["inlet_diskless_checkpoint_bytes"] <= 0 || got["inlet_diskless_deleted_objects_total"] != float64(n) {
		t.Fatalf("after a checkpoint at %d: %v", n, got)
	}
}
