package diskless

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/objstore"
	"inlet/wire"
)

// TestNoAckBeforeTheObjectIsInTheBucket: with a slow bucket, a produce to a diskless topic is
// answered, and its high watermark published, only once an object holding its batch is there.
func TestNoAckBeforeTheObjectIsInTheBucket(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{}, false)
	defer n.close()
	tp := n.topic("d", true)
	m.SetDelay(300 * time.Millisecond)
	p := tp.Partitions[0]
	sent := time.Now()
	pr := n.send(appendOf(p, -1, 0, 3, 7))
	time.Sleep(150 * time.Millisecond)
	if answered(pr) || p.HighWatermark() != 0 {
		t.Fatalf("answered %v, high watermark %d while the PUT is in flight", answered(pr), p.HighWatermark())
	}
	a := pr.wait(t, 5*time.Second)
	if a.Err != 0 || a.BaseOffset != 0 || p.HighWatermark() != 3 {
		t.Fatalf("err %d base %d hw %d", a.Err, a.BaseOffset, p.HighWatermark())
	}
	if d := pr.at.Sub(sent); d < 300*time.Millisecond {
		t.Fatalf("answered after %v, before the PUT could land", d)
	}
	objs := objects(t, m)
	if len(objs) != 1 || len(objs[0]) != 1 || objs[0][0].Base != 0 || tagOf(objs[0][0].Batch) != 7 || objs[0][0].TopicID != tp.ID {
		t.Fatalf("objects: %+v", objs)
	}
}

// TestOneObjectPerWindowAndThePutRateBound: many groups over a second go into at most one
// object per commit interval, and every batch is in exactly one of them.
func TestOneObjectPerWindowAndThePutRateBound(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{CommitInterval: 100 * time.Millisecond}, false)
	defer n.close()
	tp := n.topic("d", true)
	start := time.Now()
	var prs []*produce
	for i := 0; time.Since(start) < time.Second; i++ {
		prs = append(prs, n.send(appendOf(tp.Partitions[i%2], -1, 0, 1, byte(i))))
		time.Sleep(2 * time.Millisecond)
	}
	for _, pr := range prs {
		if a := pr.wait(t, 5*time.Second); a.Err != 0 {
			t.Fatalf("err %d", a.Err)
		}
	}
	elapsed := time.Since(start)
	puts := m.Calls(objstore.OpPut) - 1 // the topic's description
	if max := int64(elapsed/(100*time.Millisecond)) + 1; puts > max {
		t.Fatalf("%d PUTs in %v: more than one per 100 ms", puts, elapsed)
	}
	seen := 0
	for _, es := range objects(t, m) {
		seen += len(es)
	}
	if seen != len(prs) {
		t.Fatalf("%d batches in the bucket, %d produced", seen, len(prs))
	}
}

// TestLostReplyStoresNothingTwice: a PUT that lands with its reply lost is retried, meets its
// own object (ErrExists, the same bytes) and is taken as written: one object, the next number
// follows.
func TestLostReplyStoresNothingTwice(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{}, false)
	defer n.close()
	tp := n.topic("d", true)
	m.LoseNextReply(objstore.OpPut, 1, errDown)
	if a := n.send(appendOf(tp.Partitions[0], 5, 0, 2, 1)).wait(t, 5*time.Second); a.Err != 0 {
		t.Fatalf("err %d", a.Err)
	}
	if a := n.send(appendOf(tp.Partitions[0], 5, 2, 2, 2)).wait(t, 5*time.Second); a.Err != 0 || a.BaseOffset != 2 {
		t.Fatalf("err %d base %d", a.Err, a.BaseOffset)
	}
	objs := objects(t, m)
	if len(objs) != 2 || tagOf(objs[0][0].Batch) != 1 || tagOf(objs[1][0].Batch) != 2 {
		t.Fatalf("objects: %d", len(objs))
	}
	if n.c.Stats().Fenced.Load() {
		t.Fatal("its own object fenced the writer")
	}
}

// TestBucketDownFailsRetriablyThenRecovers: while the bucket is down a diskless produce is
// answered REQUEST_TIMED_OUT after the request timeout and nothing is published, a local topic
// goes on; once the bucket is back the batch lands, and the producer's retry is answered as a
// duplicate with the offset it had, not stored again.
func TestBucketDownFailsRetriablyThenRecovers(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{RequestTimeout: 300 * time.Millisecond}, false)
	defer n.close()
	d := n.topic("d", true)
	local := n.topic("local", false)
	m.SetDown(errDown)
	pr := n.send(appendOf(d.Partitions[0], 9, 0, 4, 1))
	if a := n.send(appendOf(local.Partitions[0], -1, 0, 1, 2)).wait(t, 2*time.Second); a.Err != 0 {
		t.Fatalf("local topic with the bucket down: err %d", a.Err)
	}
	if a := pr.wait(t, 5*time.Second); a.Err != wire.ErrRequestTimedOut {
		t.Fatalf("err %d, want REQUEST_TIMED_OUT", a.Err)
	}
	if hw := d.Partitions[0].HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d published with the bucket down", hw)
	}
	m.SetDown(nil)
	retry := n.send(appendOf(d.Partitions[0], 9, 0, 4, 1)).wait(t, 5*time.Second)
	if retry.Err != 0 || retry.BaseOffset != 0 || d.Partitions[0].HighWatermark() != 4 {
		t.Fatalf("retry: err %d base %d hw %d", retry.Err, retry.BaseOffset, d.Partitions[0].HighWatermark())
	}
	objs := objects(t, m)
	if len(objs) != 1 || len(objs[0]) != 1 {
		t.Fatalf("want the batch once in the bucket, got %d objects", len(objs))
	}
}

// TestBacklogBoundRefusesBeforeOffsets: with the bucket down, once MaxPendingBytes of batches
// wait, Admit refuses more (KAFKA_STORAGE_ERROR) and memory stops growing.
func TestBacklogBoundRefusesBeforeOffsets(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{MaxPendingBytes: 1000, RequestTimeout: time.Minute}, false)
	defer func() { m.SetDown(nil); n.close() }()
	d := n.topic("d", true)
	m.SetDown(errDown)
	for i := 0; i < 12; i++ { // 12 * (62 + 32) bytes > 1000
		n.send(appendOf(d.Partitions[0], -1, 0, 1, byte(i)))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := n.c.Admit()
		if code == wire.ErrKafkaStorageError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Admit still takes batches with %d bytes pending", n.c.pending.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFencedByAnotherWritersObject: an object of another writer under the next number fences
// the committer: the request is answered NOT_LEADER_OR_FOLLOWER, nothing is published, and
// later appends are refused.
func TestFencedByAnotherWritersObject(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{}, false)
	defer n.close()
	d := n.topic("d", true)
	other := format.Seal(format.AppendEntry(format.NewObject(nil), d.ID, 0, 0, batch(-1, 0, 1, 99)), Header{Incarnation: 12345, Sequence: 1, Entries: 1})
	if err := m.Put(context.Background(), LogKey(1), bytes.NewReader(other), int64(len(other))); err != nil {
		t.Fatal(err)
	}
	a := n.send(appendOf(d.Partitions[0], -1, 0, 1, 1)).wait(t, 5*time.Second)
	if a.Err != wire.ErrNotLeaderOrFollower || d.Partitions[0].HighWatermark() != 0 {
		t.Fatalf("err %d hw %d", a.Err, d.Partitions[0].HighWatermark())
	}
	if code, _ := n.c.Admit(); code != wire.ErrNotLeaderOrFollower || !n.c.Stats().Fenced.Load() {
		t.Fatalf("admit after fencing: %d", code)
	}
	if got, _ := m.Object(LogKey(1)); !bytes.Equal(got, other) {
		t.Fatal("the other writer's object was changed")
	}
}

// TestRestoreReplaysTheCommitLog: a node's diskless batches, restored on an empty disk from the
// bucket alone, come back at their offsets with their producers' windows (a retry of the last
// batch is a duplicate; the next sequence continues); a local topic does not come back.
func TestRestoreReplaysTheCommitLog(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{}, false)
	d := n.topic("d", true)
	n.topic("local", false)
	var seq [2]int32
	for i := 0; i < 20; i++ {
		p := i % 2
		if a := n.send(appendOf(d.Partitions[p], 7, seq[p], 3, byte(i))).wait(t, 5*time.Second); a.Err != 0 {
			t.Fatalf("err %d", a.Err)
		}
		seq[p] += 3
	}
	n.close()

	r := openNode(t, t.TempDir(), m, Config{}, true)
	defer r.close()
	rd, ok := r.l.Topic("d")
	if !ok || rd.ID != d.ID || !rd.Settings.Diskless {
		t.Fatalf("diskless topic not restored: %v %+v", ok, rd)
	}
	if _, ok := r.l.Topic("local"); ok {
		t.Fatal("a local topic came back from the bucket")
	}
	for p := range 2 {
		if hw := rd.Partitions[p].HighWatermark(); hw != 30 {
			t.Fatalf("partition %d at %d, want 30", p, hw)
		}
		got, err := r.l.ReadBatches(rd.Partitions[p], 0, 30, 1<<20, true, nil)
		if err != nil || len(got) != 10*62 {
			t.Fatalf("partition %d: %d bytes, %v", p, len(got), err)
		}
	}
	if pid, err := r.l.Meta().AllocateProducerID(); err != nil || pid <= 7 {
		t.Fatalf("a new producer got id %d (%v): producer 7's window came back", pid, err)
	}
	dup := r.send(appendOf(rd.Partitions[0], 7, 27, 3, 18)).wait(t, 5*time.Second)
	if dup.Err != 0 || dup.BaseOffset != 27 {
		t.Fatalf("retry of the last batch: err %d base %d, want a duplicate at 27", dup.Err, dup.BaseOffset)
	}
	next := r.send(appendOf(rd.Partitions[0], 7, 30, 1, 20)).wait(t, 5*time.Second)
	if next.Err != 0 || next.BaseOffset != 30 {
		t.Fatalf("next batch: err %d base %d", next.Err, next.BaseOffset)
	}
	if got := len(objects(t, m)); got != 21 {
		t.Fatalf("%d objects, want 21 (the duplicate stored nothing)", got)
	}
}

// TestRestartUploadsWhatNeverReachedTheBucket: a batch written locally while the bucket was
// down (answered REQUEST_TIMED_OUT, never acknowledged) is PUT when the node starts again on
// its own disk, before it serves; a restore from the bucket then has it.
func TestRestartUploadsWhatNeverReachedTheBucket(t *testing.T) {
	m := objstore.NewMemory()
	dir := t.TempDir()
	n := openNode(t, dir, m, Config{RequestTimeout: 100 * time.Millisecond, CloseTimeout: 100 * time.Millisecond}, false)
	d := n.topic("d", true)
	if a := n.send(appendOf(d.Partitions[1], 3, 0, 2, 1)).wait(t, 5*time.Second); a.Err != 0 {
		t.Fatal(a.Err)
	}
	m.SetDown(errDown)
	if a := n.send(appendOf(d.Partitions[1], 3, 2, 2, 2)).wait(t, 5*time.Second); a.Err != wire.ErrRequestTimedOut {
		t.Fatalf("err %d", a.Err)
	}
	n.close()
	m.SetDown(nil)

	again := openNode(t, dir, m, Config{}, false)
	p := again.l.Topics()[0].Partitions[1]
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d after the restart", hw)
	}
	again.close()
	objs := objects(t, m)
	if len(objs) != 2 || objs[1][0].Base != 2 || tagOf(objs[1][0].Batch) != 2 {
		t.Fatalf("objects: %+v", objs)
	}
	r := openNode(t, t.TempDir(), m, Config{}, true)
	defer r.close()
	if hw := r.l.Topics()[0].Partitions[1].HighWatermark(); hw != 4 {
		t.Fatalf("restored at %d, want 4", hw)
	}
}

// TestEmptyBucketStartsANewNode: a restore from an empty bucket gives an empty node whose first
// object is number 1.
func TestEmptyBucketStartsANewNode(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{}, true)
	defer n.close()
	if len(n.l.Topics()) != 0 || n.c.next != 1 {
		t.Fatalf("topics %d, next object %d", len(n.l.Topics()), n.c.next)
	}
}

var _ batchlog.DisklessCommitter = (*Committer)(nil)

// TestNothingPutOrAnsweredWhileNotTheWriter: while the lease is not held (Writable false) no
// commit object is PUT and nothing is published; once it is held again the batch lands with
// the lease's epoch in its header.
func TestNothingPutOrAnsweredWhileNotTheWriter(t *testing.T) {
	m := objstore.NewMemory()
	var writable atomic.Bool
	writable.Store(true)
	n := openNode(t, t.TempDir(), m, Config{Writable: writable.Load, Epoch: func() uint64 { return 7 }}, false)
	defer n.close()
	d := n.topic("d", true)
	writable.Store(false)
	pr := n.send(appendOf(d.Partitions[0], -1, 0, 1, 1))
	time.Sleep(300 * time.Millisecond)
	if answered(pr) || len(objects(t, m)) != 0 || d.Partitions[0].HighWatermark() != 0 {
		t.Fatalf("answered %v, %d objects, hw %d while not the writer", answered(pr), len(objects(t, m)), d.Partitions[0].HighWatermark())
	}
	writable.Store(true)
	if a := pr.wait(t, 5*time.Second); a.Err != 0 {
		t.Fatalf("err %d", a.Err)
	}
	b, _ := m.Object(LogKey(1))
	if h, _, err := Decode(b); err != nil || h.Epoch != 7 {
		t.Fatalf("header %+v, %v", h, err)
	}
}

// TestStaleWritersObjectIsVoid: an object of an older epoch landing under the next number
// (a writer that lost the prefix, its PUT late) does not fence the writer holding it now: the
// number is skipped, the next object names the last one of the log, and a restore never reads
// the stale one.
func TestStaleWritersObjectIsVoid(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{Epoch: func() uint64 { return 2 }}, false)
	d := n.topic("d", true)
	stale := format.Seal(format.AppendEntry(format.NewObject(nil), d.ID, 0, 0, batch(-1, 0, 1, 99)), Header{Epoch: 1, Incarnation: 5, Sequence: 1, Entries: 1})
	if err := m.Put(context.Background(), LogKey(1), bytes.NewReader(stale), int64(len(stale))); err != nil {
		t.Fatal(err)
	}
	if a := n.send(appendOf(d.Partitions[0], -1, 0, 2, 1)).wait(t, 5*time.Second); a.Err != 0 || a.BaseOffset != 0 {
		t.Fatalf("err %d base %d", a.Err, a.BaseOffset)
	}
	if a := n.send(appendOf(d.Partitions[0], -1, 0, 1, 2)).wait(t, 5*time.Second); a.Err != 0 || a.BaseOffset != 2 {
		t.Fatalf("err %d base %d", a.Err, a.BaseOffset)
	}
	n.close()
	b, _ := m.Object(LogKey(2))
	if h, _, err := Decode(b); err != nil || h.After != 0 || h.Epoch != 2 {
		t.Fatalf("object 2: %+v %v", h, err)
	}
	b, _ = m.Object(LogKey(3))
	if h, _, err := Decode(b); err != nil || h.After != 2 {
		t.Fatalf("object 3: %+v %v", h, err)
	}
	r := openNode(t, t.TempDir(), m, Config{Epoch: func() uint64 { return 3 }}, true)
	defer r.close()
	p := r.l.Topics()[0].Partitions[0]
	got, err := r.l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil)
	if err != nil || p.HighWatermark() != 3 || len(got) != 2*62 || tagOf(got) != 1 || tagOf(got[62:]) != 2 {
		t.Fatalf("restored: hw %d, %d bytes, %v", p.HighWatermark(), len(got), err)
	}
}

// TestCommitPutsHoldTheGate: a commit object's PUT is marked on Config.Gate while in flight,
// so that the remote tier's uploads give way to it, and the gate is idle once it has landed.
func TestCommitPutsHoldTheGate(t *testing.T) {
	m := objstore.NewMemory()
	gate := &objstore.PutGate{}
	n := openNode(t, t.TempDir(), m, Config{Gate: gate}, false)
	defer n.close()
	tp := n.topic("d", true)
	m.SetDelay(300 * time.Millisecond)
	pr := n.send(appendOf(tp.Partitions[0], -1, 0, 3, 7))
	time.Sleep(150 * time.Millisecond)
	gate.Wait(context.Background(), 0) // counted only if a PUT is in flight
	if w, _ := gate.Waited(); w != 1 {
		t.Fatalf("no commit PUT held the gate while one was in flight")
	}
	if a := pr.wait(t, 5*time.Second); a.Err != 0 {
		t.Fatalf("err %d", a.Err)
	}
	gate.Wait(context.Background(), time.Hour)
	if w, _ := gate.Waited(); w != 1 {
		t.Fatalf("the gate was held after the PUT landed")
	}
}
