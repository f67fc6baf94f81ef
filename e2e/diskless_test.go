package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/batchlog"
	"inlet/diskless"
	"inlet/meta"
	"inlet/objstore"
	"inlet/server"
	"inlet/tier"
)

// Diskless topics end to end: a node wired as cmd/inlet wires one with a bucket (the remote
// tier and the diskless commit log on it), restored from the bucket alone.

// disklessNode is one node on a bucket; stop, then start again on an empty directory with
// restore set, is the loss of the node and its disk.
type disklessNode struct {
	t      *testing.T
	dir    string
	bucket objstore.Bucket
	listen string
	srv    *server.Server
	blog   *batchlog.Log
	c      *diskless.Committer
	tier   *tier.Tier
	addr   string
}

func startDisklessNode(t *testing.T, bucket objstore.Bucket, dir, listen string, restore bool, mods ...func(*server.Config)) *disklessNode {
	t.Helper()
	n := &disklessNode{t: t, dir: dir, bucket: bucket, listen: listen}
	cat, err := meta.Open(meta.Options{Dir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// Checkpoints as cmd/inlet wires them: the tier, opened after Recover, covers commit objects.
	var covered atomic.Pointer[tier.Tier]
	n.c = diskless.New(diskless.Config{Bucket: bucket, NodeID: 1, Logger: testLogger(), CommitInterval: 50 * time.Millisecond,
		CheckpointInterval: 200 * time.Millisecond, UploadedEnd: func(p *batchlog.Partition) int64 {
			if tr := covered.Load(); tr != nil {
				return tr.UploadedEnd(p)
			}
			return 0
		}})
	cfg := testServerConfig()
	cfg.Listen, cfg.Diskless = listen, n.c
	for _, mod := range mods {
		mod(&cfg)
	}
	srv, err := server.New(cfg, cat)
	if err != nil {
		t.Fatal(err)
	}
	blog, err := batchlog.Open(batchlog.Options{Dir: dir, Logger: testLogger(), Meta: cat, Txns: n.c.TxnVerifier(srv.Txns()), Diskless: n.c})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if restore {
		if _, _, err := tier.Restore(ctx, blog, cat, bucket, testLogger()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.c.Recover(ctx, blog); err != nil {
		t.Fatal(err)
	}
	cat.SetProducerIDReserver(n.c.KeepProducerIDs)
	tc := *tierConfig(bucket)
	tc.Logger = testLogger()
	if n.tier, err = tier.Open(blog, cat, tc); err != nil {
		t.Fatal(err)
	}
	covered.Store(n.tier)
	n.tier.Start()
	if err := srv.Start(blog, n.tier); err != nil {
		t.Fatal(err)
	}
	n.srv, n.blog, n.addr = srv, blog, srv.Addr()
	t.Cleanup(n.stop)
	return n
}

func (n *disklessNode) stop() {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.srv.Shutdown(ctx); err != nil {
		n.t.Errorf("shutdown: %v", err)
	}
	n.tier.Close()
	if err := n.blog.Close(); err != nil {
		n.t.Errorf("close log: %v", err)
	}
	n.c.Close()
	n.srv = nil
}

// TestDisklessTopicConfigs: diskless.enable is taken at creation on a node with a bucket and
// shown by DescribeConfigs, refused without a bucket, with compaction, and as a change of an
// existing topic (AlterConfigs and IncrementalAlterConfigs), while other changes go on.
func TestDisklessTopicConfigs(t *testing.T) {
	plain := startBroker(t, nil)
	adm := kadm.NewClient(tierClient(t, &broker{addr: plain.addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	on := map[string]*string{"diskless.enable": kadm.StringPtr("true")}
	if r, _ := adm.CreateTopic(ctx, 1, 1, on, "nobucket"); r.Err != kerr.InvalidConfig {
		t.Fatalf("diskless without a bucket: %v", r.Err)
	}

	n := startDisklessNode(t, objstore.NewMemory(), t.TempDir(), "127.0.0.1:0", false)
	adm = kadm.NewClient(tierClient(t, &broker{addr: n.addr}))
	if r, err := adm.CreateTopic(ctx, 2, 1, on, "d"); err != nil || r.Err != nil {
		t.Fatalf("create diskless: %v %v", err, r.Err)
	}
	compact := map[string]*string{"diskless.enable": kadm.StringPtr("true"), "cleanup.policy": kadm.StringPtr("compact")}
	if r, _ := adm.CreateTopic(ctx, 1, 1, compact, "dc"); r.Err != kerr.InvalidConfig {
		t.Fatalf("compacted diskless: %v", r.Err)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "local"); err != nil || r.Err != nil {
		t.Fatalf("create local: %v %v", err, r.Err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "d", "local")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		want := map[string]string{"d": "true", "local": "false"}[rc.Name]
		found := false
		for _, c := range rc.Configs {
			if c.Key == "diskless.enable" {
				found = c.Value != nil && *c.Value == want
			}
		}
		if !found {
			t.Fatalf("DescribeConfigs of %s does not show diskless.enable=%s", rc.Name, want)
		}
	}
	for _, c := range []struct {
		topic, value string
	}{{"d", "false"}, {"local", "true"}} {
		r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "diskless.enable", Value: kadm.StringPtr(c.value)}}, c.topic)
		if err != nil || len(r) != 1 || r[0].Err != kerr.InvalidConfig {
			t.Fatalf("incremental alter %s to diskless.enable=%s: %v %+v", c.topic, c.value, err, r)
		}
		r, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "diskless.enable", Value: kadm.StringPtr(c.value)}}, c.topic)
		if err != nil || len(r) != 1 || r[0].Err != kerr.InvalidConfig {
			t.Fatalf("alter %s to diskless.enable=%s: %v %+v", c.topic, c.value, err, r)
		}
	}
	if r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("3600000")}}, "d"); err != nil || r[0].Err != nil {
		t.Fatalf("alter retention.ms of a diskless topic: %v %+v", err, r)
	}
}

// TestDisklessRestoreFromTheBucketAlone: an idempotent franz-go producer writes to a diskless
// topic; the node is closed and its data directory deleted; a node restored from the bucket
// serves every acknowledged record once, at its offset; the same producer carries on, and a
// batch it resends from before the loss is answered with its first offset, not stored again.
func TestDisklessRestoreFromTheBucketAlone(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false)
	addr := n.addr
	adm := kadm.NewClient(tierClient(t, &broker{addr: addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, "d"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	// The producer outlives the node: it reconnects to the restored one on the same address.
	cl := tierClient(t, &broker{addr: addr}, kgo.DefaultProduceTopic("d"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	const first = 600
	produce := func(from, to int) map[string]int64 {
		var mu sync.Mutex
		var wg sync.WaitGroup
		acked := map[string]int64{}
		var failed error
		for i := from; i < to; i++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = err
					return
				}
				acked[string(r.Value)] = r.Offset
			})
		}
		wg.Wait()
		if failed != nil {
			t.Fatalf("produce: %v", failed)
		}
		return acked
	}
	acked := produce(0, first)

	// Raw: one idempotent batch, and its bytes kept to resend after the loss.
	rc := dialRaw(t, addr)
	pid := rc.initProducerID()
	batch := plainBatch(5, time.Now().UnixMilli(), "raw").idempotent(pid, 0, 0).encode()
	got := rc.produceOne(9, "d", 0, batch)
	if got.ErrorCode != 0 {
		t.Fatalf("raw produce: %d", got.ErrorCode)
	}
	rawBase := got.BaseOffset
	rc.c.Close()
	// The tier uploads, a checkpoint folds what it covers, the commit objects go: the restore
	// below takes the raw producer's window from the checkpoint.
	var landed uint64
	for _, k := range bucket.Keys() {
		if n, err := strconv.ParseUint(strings.TrimPrefix(k, diskless.LogPrefix), 10, 64); err == nil && strings.HasPrefix(k, diskless.LogPrefix) {
			landed = max(landed, n)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); n.c.CheckpointStats().Last < landed; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of the %d commit objects: %+v", landed, n.c.CheckpointStats())
		}
	}

	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), addr, true)
	if read := r.c.Stats().RecoverObjects.Load(); read >= int64(landed) {
		t.Fatalf("the restore read %d commit objects: the checkpoint of %d was not used", read, landed)
	}

	rc = dialRaw(t, r.addr)
	if again := rc.produceOne(9, "d", 0, batch); again.ErrorCode != 0 || again.BaseOffset != rawBase {
		t.Fatalf("resent batch: error %d base %d, want a duplicate at %d", again.ErrorCode, again.BaseOffset, rawBase)
	}
	next := rc.produceOne(9, "d", 0, plainBatch(2, time.Now().UnixMilli(), "raw2").idempotent(pid, 0, 5).encode())
	if next.ErrorCode != 0 || next.BaseOffset != rawBase+5 {
		t.Fatalf("next batch after the loss: error %d base %d, want %d", next.ErrorCode, next.BaseOffset, rawBase+5)
	}
	for k, v := range produce(first, first+300) {
		acked[k] = v
	}

	seen := map[string]int{}
	for _, g := range kgoConsume(ctx, t, r.addr, "d", 3, len(acked)+7) {
		if len(g.value) >= 3 && string(g.value[:3]) == "raw" {
			continue
		}
		seen[string(g.value)]++
		if off, ok := acked[string(g.value)]; !ok || off != g.offset {
			t.Fatalf("record %q at offset %d, acknowledged at %d (%v)", g.value, g.offset, off, ok)
		}
	}
	for k := range acked {
		if seen[k] != 1 {
			t.Fatalf("record %s read %d times", k, seen[k])
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("%d records read, %d acknowledged", len(seen), len(acked))
	}
}

// TestDisklessDefaultForNewTopics: with log.diskless.enable (--log-diskless-enable) a topic
// auto-created by a produce, or created without saying, is diskless and described in the
// bucket before it is used; one created compacted, or with diskless.enable=false, is not.
func TestDisklessDefaultForNewTopics(t *testing.T) {
	bucket := objstore.NewMemory()
	n := startDisklessNode(t, bucket, t.TempDir(), "127.0.0.1:0", false, func(c *server.Config) { c.DisklessDefault = true })
	cl := tierClient(t, &broker{addr: n.addr}, kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to an auto-created topic: %v", err)
	}
	adm := kadm.NewClient(cl)
	for name, configs := range map[string]map[string]*string{
		"plain": nil, "compacted": {"cleanup.policy": kadm.StringPtr("compact")}, "off": {"diskless.enable": kadm.StringPtr("false")},
	} {
		if r, err := adm.CreateTopic(ctx, 1, 1, configs, name); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, r.Err)
		}
	}
	for name, want := range map[string]bool{"auto": true, "plain": true, "compacted": false, "off": false} {
		tp, ok := n.blog.Topic(name)
		if !ok || tp.Settings.Diskless != want {
			t.Errorf("%s: diskless %v, want %v", name, ok && tp.Settings.Diskless, want)
			continue
		}
		described := false
		for _, k := range bucket.Keys() {
			described = described || strings.HasPrefix(k, fmt.Sprintf("%s/%x/topic-", name, tp.ID))
		}
		if described != want {
			t.Errorf("%s: described in the bucket %v, want %v", name, described, want)
		}
	}
}
