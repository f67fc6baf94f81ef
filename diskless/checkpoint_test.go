package diskless

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/idem"
	"inlet/meta"
	"inlet/objstore"
	"inlet/tier"
	"inlet/wire"
)

// tiered is a node with the remote tier on the same bucket, as cmd/inlet wires them: the
// committer's checkpoints cover what the tier has uploaded.
type tiered struct {
	*node
	tr *tier.Tier
}

type allowTxns struct{}

func (allowTxns) Verify(string, int64, int16, string, int32) bool { return true }

func openTiered(t *testing.T, dir string, bucket objstore.Bucket, epoch uint64, restore bool, mods ...func(*tier.Config)) *tiered {
	t.Helper()
	var tr atomic.Pointer[tier.Tier]
	cfg := Config{Bucket: bucket, Logger: quiet, CommitInterval: 10 * time.Millisecond, CheckpointInterval: time.Hour, // Checkpoint is called by the tests
		Epoch: func() uint64 { return epoch },
		UploadedEnd: func(p *batchlog.Partition) int64 {
			if t := tr.Load(); t != nil {
				return t.UploadedEnd(p)
			}
			return 0
		}}
	c := New(cfg)
	l, err := batchlog.Open(batchlog.Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Diskless: c, Logger: quiet,
		Txns: c.TxnVerifier(allowTxns{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if restore {
		if _, _, err := tier.Restore(ctx, l, l.Meta(), bucket, quiet); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Recover(ctx, l); err != nil {
		t.Fatal(err)
	}
	tc := tier.Config{Bucket: bucket, ObjectBytes: 1, RetentionInterval: -1, Logger: quiet}
	for _, mod := range mods {
		mod(&tc)
	}
	ti, err := tier.Open(l, l.Meta(), tc)
	if err != nil {
		t.Fatal(err)
	}
	tr.Store(ti)
	return &tiered{node: &node{t: t, dir: dir, l: l, c: c}, tr: ti}
}

func (n *tiered) close() {
	n.tr.Close()
	n.node.close()
}

// upload runs the tier's pass now: everything below the high watermarks goes up.
func (n *tiered) upload() {
	n.t.Helper()
	if err := n.tr.RunOnce(context.Background(), time.Now()); err != nil {
		n.t.Fatal(err)
	}
}

func (n *tiered) checkpoint() uint64 {
	n.t.Helper()
	k, err := n.c.Checkpoint(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	return k
}

// put sends one batch and waits for its answer.
func (n *tiered) put(a batchlog.Append) *batchlog.Append {
	n.t.Helper()
	r := n.send(a).wait(n.t, 10*time.Second)
	if r.Err != wire.ErrNone {
		n.t.Fatalf("append: error %d", r.Err)
	}
	return r
}

// readAll reads p from its log start to its high watermark, from the tier below the local
// start, and returns each batch's tag by base offset.
func (n *tiered) readAll(p *batchlog.Partition) map[int64]byte {
	n.t.Helper()
	out := map[int64]byte{}
	for off := p.LogStartOffset(); off < p.HighWatermark(); {
		var plan batchlog.ReadPlan
		var err error
		if off < p.LocalLogStartOffset() {
			err = n.tr.PlanRead(p, off, p.HighWatermark(), 1<<20, true, &plan)
		} else {
			err = n.l.PlanRead(p, off, p.HighWatermark(), 1<<20, true, &plan)
		}
		if err != nil {
			n.t.Fatalf("read %s/%d at %d: %v", p.Topic, p.Index, off, err)
		}
		b, err := n.l.AppendPlanned(nil, &plan)
		if err != nil || len(b) == 0 {
			n.t.Fatalf("read %s/%d at %d: %d bytes, %v", p.Topic, p.Index, off, len(b), err)
		}
		for len(b) > 0 {
			h, err := wire.ParseBatchHeader(b)
			if err != nil {
				n.t.Fatal(err)
			}
			size := int(h.BatchLength) + 12
			if !h.IsControl() {
				out[h.BaseOffset] = tagOf(b[:size])
			}
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			b = b[size:]
		}
	}
	return out
}

func logKeys(m *objstore.Memory, prefix string) []uint64 {
	var out []uint64
	for _, k := range m.Keys() {
		if n, ok := ParseNumbered(prefix, k); ok {
			out = append(out, n)
		}
	}
	return out
}

func txnAppend(p *batchlog.Partition, pid int64, seq, records int32, tag byte) batchlog.Append {
	a := appendOf(p, pid, seq, records, tag)
	binary.BigEndian.PutUint16(a.Batch[21:], 1<<4) // attributes: transactional
	binary.BigEndian.PutUint32(a.Batch[17:], crc32.Checksum(a.Batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	a.Transactional = true
	return a
}

// history is what checkpointHistory wrote, for the restored node to be checked against.
type history struct {
	tags      [2]map[int64]byte
	hw        [2]int64
	last7     int64 // the base offset of producer 7's last batch (after the checkpoint)
	last8     int64 // of producer 8's (before it: its window comes from the checkpoint)
	abortedAt int64
	n         uint64
}

// checkpointHistory produces to a diskless topic with a tier: idempotent producers 7 and 8,
// an aborted transaction of producer 9, a group offset and a transactional id's record, a
// DeleteRecords on partition 1; uploads, checkpoints, then produces past the checkpoint.
func checkpointHistory(t *testing.T, n *tiered) history {
	var h history
	tp := n.topic("d", true)
	p0, p1 := tp.Partitions[0], tp.Partitions[1]
	for i := int32(0); i < 4; i++ {
		n.put(appendOf(p0, 7, i*2, 2, byte('a'+i)))
		n.put(appendOf(p1, 8, i, 1, byte('A'+i)))
	}
	h.last8 = n.put(appendOf(p1, 8, 4, 1, 'E')).BaseOffset
	n.put(txnAppend(p0, 9, 0, 1, 'x'))
	n.put(txnAppend(p0, 9, 1, 1, 'y'))
	marker := batchlog.MarkerAppend(p0, 9, 0, batchlog.AbortMarker, 0, time.Now().UnixMilli())
	h.abortedAt = n.put(marker).BaseOffset
	gs := n.c.GroupStore(n.l.Meta())
	if err := gs.CommitOffsets("g", map[meta.OffsetKey]meta.CommittedOffset{{Topic: "d", Partition: 0}: {Offset: 5, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if err := gs.SaveGroup("g", meta.GroupRecord{ProtocolType: "consumer", Generation: 7}); err != nil {
		t.Fatal(err)
	}
	if err := n.c.TxnStore(n.l.Meta()).SaveTxn("tx", []byte("record")); err != nil {
		t.Fatal(err)
	}
	if err := n.c.KeepProducerIDs(50000); err != nil {
		t.Fatal(err)
	}
	if _, err := n.l.DeleteRecords(p1, 2); err != nil {
		t.Fatal(err)
	}
	n.upload()
	if h.n = n.checkpoint(); h.n == 0 {
		t.Fatal("no checkpoint written once the tier covered the commit log")
	}
	// Past the checkpoint: in commit objects only.
	h.last7 = n.put(appendOf(p0, 7, 8, 2, 'z')).BaseOffset
	for i, p := range []*batchlog.Partition{p0, p1} {
		h.tags[i], h.hw[i] = n.readAll(p), p.HighWatermark()
	}
	return h
}

// checkRestored checks a node rebuilt from the bucket against h.
func checkRestored(t *testing.T, n *tiered, h history) {
	t.Helper()
	tp, ok := n.l.Topic("d")
	if !ok {
		t.Fatal("topic d not restored")
	}
	for i, p := range tp.Partitions {
		if p.HighWatermark() != h.hw[i] {
			t.Fatalf("partition %d: high watermark %d, want %d", i, p.HighWatermark(), h.hw[i])
		}
		got := n.readAll(p)
		if len(got) != len(h.tags[i]) {
			t.Fatalf("partition %d: %d batches restored, want %d (%v, want %v)", i, len(got), len(h.tags[i]), got, h.tags[i])
		}
		for off, tag := range h.tags[i] {
			if got[off] != tag {
				t.Fatalf("partition %d at %d: batch %q, want %q", i, off, got[off], tag)
			}
		}
	}
	p0, p1 := tp.Partitions[0], tp.Partitions[1]
	if ls := p1.LogStartOffset(); ls != 2 {
		t.Fatalf("partition 1's log start %d after the restore, want 2 (DeleteRecords)", ls)
	}
	// A retry of each producer's last acknowledged batch is a duplicate, with its offsets.
	if r := n.send(appendOf(p0, 7, 8, 2, 'z')).wait(t, 10*time.Second); r.Err != wire.ErrNone || r.BaseOffset != h.last7 {
		t.Fatalf("retry of producer 7's last batch: error %d at %d, want the duplicate at %d", r.Err, r.BaseOffset, h.last7)
	}
	if r := n.send(appendOf(p1, 8, 4, 1, 'E')).wait(t, 10*time.Second); r.Err != wire.ErrNone || r.BaseOffset != h.last8 {
		t.Fatalf("retry of producer 8's last batch: error %d at %d, want the duplicate at %d", r.Err, r.BaseOffset, h.last8)
	}
	if p0.HighWatermark() != h.hw[0] || p1.HighWatermark() != h.hw[1] {
		t.Fatal("a retried batch was appended again")
	}
	// A sequence gap is still refused: the windows are the producers', not empty ones.
	if r := n.send(appendOf(p0, 7, 20, 1, 'q')).wait(t, 10*time.Second); r.Err != wire.ErrOutOfOrderSequenceNumber {
		t.Fatalf("a batch past a gap in producer 7's sequence: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", r.Err)
	}
	if ab := p0.AbortedTxns(0, p0.HighWatermark()); len(ab) != 1 || ab[0].ProducerID != 9 || ab[0].LastOffset != h.abortedAt {
		t.Fatalf("aborted transactions %+v, want producer 9's ending at %d", ab, h.abortedAt)
	}
	groups, err := n.l.Meta().LoadGroups()
	if err != nil || groups["g"] == nil || groups["g"].Offsets[meta.OffsetKey{Topic: "d", Partition: 0}].Offset != 5 {
		t.Fatalf("group g's offset not restored: %+v, %v", groups["g"], err)
	}
	if g := groups["g"].Record; g.Generation != 7 {
		t.Fatalf("group g's record not restored: %+v", g)
	}
	if id, err := n.l.Meta().AllocateProducerID(); err != nil || id < 50000 {
		t.Fatalf("a producer id of the reserved block handed out again after the restore: %d, %v", id, err)
	}
	txns, err := n.l.Meta().LoadTxns()
	if err != nil || string(txns["tx"]) == "" {
		t.Fatalf("transactional id tx not restored: %v", err)
	}
}

// TestCheckpointDeletesCoveredObjectsAndRestores: once the tier has uploaded what the commit
// objects hold, a checkpoint folds them and they are deleted; a node rebuilt on an empty disk
// from the checkpoint, the tier and the objects after it has every record, the group offsets,
// the transactional ids, the aborted transactions, the log starts and the producer windows.
func TestCheckpointDeletesCoveredObjectsAndRestores(t *testing.T) {
	bucket := objstore.NewMemory()
	n := openTiered(t, t.TempDir(), bucket, 0, false)
	h := checkpointHistory(t, n)
	n.close()
	for _, k := range logKeys(bucket, LogPrefix) {
		if k <= h.n {
			t.Fatalf("commit object %d still in the bucket after checkpoint %d", k, h.n)
		}
	}
	if ks := logKeys(bucket, CheckpointPrefix); len(ks) != 1 || ks[0] != h.n {
		t.Fatalf("checkpoints %v in the bucket, want [%d]", ks, h.n)
	}
	r := openTiered(t, t.TempDir(), bucket, 0, true)
	defer r.close()
	checkRestored(t, r, h)
	if st := r.c.Stats(); st.RecoverObjects.Load() >= int64(h.n) {
		t.Fatalf("the restore read %d commit objects, the checkpoint covered %d", st.RecoverObjects.Load(), h.n)
	}
}

// TestCheckpointWithoutItsDeletionsRestores: a crash between the checkpoint's PUT and the
// deletions leaves the objects it covers; a restore ignores them, and the next checkpoint
// deletes them.
func TestCheckpointWithoutItsDeletionsRestores(t *testing.T) {
	bucket := objstore.NewMemory()
	n := openTiered(t, t.TempDir(), bucket, 0, false)
	tp := n.topic("e", true)
	n.put(appendOf(tp.Partitions[0], 7, 0, 1, 'a'))
	n.upload()
	bucket.FailNext(objstore.OpDelete, 1000, errDown)
	if _, err := n.c.Checkpoint(context.Background()); err == nil {
		t.Fatal("checkpoint's deletions failed, and it said nothing")
	}
	bucket.FailNext(objstore.OpDelete, 0, nil)
	if len(logKeys(bucket, LogPrefix)) == 0 || len(logKeys(bucket, CheckpointPrefix)) != 1 {
		t.Fatal("the test wants the checkpoint and the objects it covers in the bucket")
	}
	n.close()
	bucket.FailNext(objstore.OpDelete, 0, nil)
	n = openTiered(t, t.TempDir(), bucket, 0, true)
	h := checkpointHistory(t, n)
	n.close()
	r := openTiered(t, t.TempDir(), bucket, 0, true)
	defer r.close()
	checkRestored(t, r, h)
	for _, k := range logKeys(bucket, LogPrefix) {
		if k <= h.n {
			t.Fatalf("commit object %d, left by the cut checkpoint, was not deleted by the next one (%d)", k, h.n)
		}
	}
}

// TestStaleWritersCheckpointIsIgnored: a checkpoint PUT by a writer that lost the prefix,
// folding an object of its own that the next writer voided, is not used: the restore reads the
// log as the next writer left it.
func TestStaleWritersCheckpointIsIgnored(t *testing.T) {
	bucket := objstore.NewMemory()
	a := openTiered(t, t.TempDir(), bucket, 1, false)
	tp := a.topic("d", true)
	p := tp.Partitions[0]
	for i := int32(0); i < 3; i++ {
		a.put(appendOf(p, 7, i, 1, byte('a'+i)))
	}
	a.close()
	b := openTiered(t, t.TempDir(), bucket, 2, true)
	btp, _ := b.l.Topic("d")
	bp := btp.Partitions[0]
	last := logKeys(bucket, LogPrefix)
	after := last[len(last)-1]
	// The old writer lands an object late, then a checkpoint folding it and a group offset.
	stale := format.NewObject(nil)
	sb := batch(7, 3, 1, 'X')
	binary.BigEndian.PutUint64(sb[0:], uint64(bp.HighWatermark()))
	stale = format.AppendEntry(stale, tp.ID, 0, bp.HighWatermark(), sb)
	body := format.Seal(stale, Header{Epoch: 1, Sequence: after + 1, After: after, Entries: 1})
	if err := bucket.Put(context.Background(), LogKey(after+1), strings.NewReader(string(body)), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	b.put(appendOf(bp, 7, 3, 1, 'd')) // voids it: the object after names `after`
	ck := format.AppendState(format.NewObject(nil), StateCheckpoint, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, after+1), 0))
	ck = format.AppendState(ck, StateGroupOffsets, encodeGroupOp(nil, groupOp{Op: opCommit, Group: "stale", Offsets: []groupOffset{{Topic: "d", Offset: 9}}}))
	body = format.Seal(ck, Header{Epoch: 1, Sequence: after + 1, After: after, Entries: 2})
	if err := bucket.Put(context.Background(), CheckpointKey(after+1), strings.NewReader(string(body)), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	want := b.readAll(bp)
	b.close()
	r := openTiered(t, t.TempDir(), bucket, 3, true)
	defer r.close()
	rtp, _ := r.l.Topic("d")
	rp := rtp.Partitions[0]
	got := r.readAll(rp)
	if len(got) != len(want) || got[3] != 'd' {
		t.Fatalf("restored %v, want %v (the stale writer's checkpoint or object was used)", got, want)
	}
	if groups, _ := r.l.Meta().LoadGroups(); groups["stale"] != nil {
		t.Fatal("the stale writer's checkpoint's group offset was restored")
	}
}

// FuzzCheckpoint: decodeCheckpoint never panics on any bytes, and a partition entry it accepts
// re-encodes (encodePart) to bytes that decode to the same fold.
func FuzzCheckpoint(f *testing.F) {
	w := idem.NewState()
	w.Push(0, 0, 3, 10)
	w.TxnFirstOffset = 12
	part := encodePart(nil, partRef{[16]byte{7}, 1}, &partFold{logStart: 2, endN: 13, end: 20, windows: map[int64]*idem.State{5: &w},
		aborted: []batchlog.AbortedTxn{{ProducerID: 5, FirstOffset: 3, LastOffset: 4}}})
	obj := format.AppendState(format.NewObject(nil), StateCheckpoint, make([]byte, 16))
	obj = format.AppendState(obj, StateGroupOffsets, encodeGroupOp(nil, groupOp{Op: opDeleteGroup, Group: "g"}))
	obj = format.AppendState(obj, StatePartition, part)
	f.Add(format.Seal(obj, Header{Sequence: 1, Entries: 3}))
	f.Add(part)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeCheckpoint("k", 1, b)
		r, pf, err := decodePart(b)
		if err != nil {
			return
		}
		r2, pf2, err := decodePart(encodePart(nil, r, pf))
		if err != nil || r2 != r || pf2.logStart != pf.logStart || pf2.end != pf.end || pf2.endN != pf.endN ||
			len(pf2.windows) != len(pf.windows) || !slices.Equal(pf2.aborted, pf.aborted) {
			t.Fatalf("a partition entry does not re-encode to itself: %v", err)
		}
		for pid, w := range pf.windows {
			if w2 := pf2.windows[pid]; w2 == nil || !bytes.Equal(w2.AppendBinary(nil), w.AppendBinary(nil)) {
				t.Fatalf("producer %d's window does not re-encode to itself", pid)
			}
		}
	})
}

// TestRetentionBeforeARestoreStaysDone: total retention deletes a diskless partition's
// batches from the tier (and the checkpoint then deletes their commit objects); a restore
// starts the partition where they ended, with the later batches, and brings none back.
func TestRetentionBeforeARestoreStaysDone(t *testing.T) {
	bucket := objstore.NewMemory()
	retain := func(c *tier.Config) { c.RetentionInterval = time.Hour }
	n := openTiered(t, t.TempDir(), bucket, 0, false, retain)
	tp, err := n.l.CreateTopicBy("r", 1, map[string]string{"diskless.enable": "true", "retention.ms": "60000"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.c.Describe(context.Background(), tp); err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	for i := range 3 {
		n.put(appendOf(p, -1, 0, 1, byte('a'+i))) // timestamps 0: past retention.ms
	}
	n.upload() // uploads, then retention deletes the objects and moves the log start
	if p.LogStartOffset() != 3 {
		t.Fatalf("log start %d after retention, want 3", p.LogStartOffset())
	}
	if n.checkpoint() == 0 {
		t.Fatal("no checkpoint")
	}
	n.put(appendOf(p, -1, 0, 1, 'd'))
	n.close()
	r := openTiered(t, t.TempDir(), bucket, 0, true)
	defer r.close()
	rtp, _ := r.l.Topic("r")
	rp := rtp.Partitions[0]
	if rp.LogStartOffset() != 3 || rp.HighWatermark() != 4 {
		t.Fatalf("restored log start %d, high watermark %d; want 3, 4", rp.LogStartOffset(), rp.HighWatermark())
	}
	if got := r.readAll(rp); len(got) != 1 || got[3] != 'd' {
		t.Fatalf("restored %v, want only the batch after retention", got)
	}
}

// TestCheckpointThenRestartOnTheNodesDisk: a restart on the node's own disk after a
// checkpoint starts from it (the objects it covers are gone), keeps the node's windows, and
// checkpoints on: the next one deletes the objects written since.
func TestCheckpointThenRestartOnTheNodesDisk(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := openTiered(t, dir, bucket, 0, false)
	h := checkpointHistory(t, n)
	n.close()
	r := openTiered(t, dir, bucket, 0, false)
	defer r.close()
	checkRestored(t, r, h)
	tp, _ := r.l.Topic("d")
	r.put(appendOf(tp.Partitions[0], 7, 10, 1, 'w'))
	r.upload()
	m := r.checkpoint()
	if m <= h.n {
		t.Fatalf("checkpoint at %d after the restart, the last one was at %d", m, h.n)
	}
	if ks := logKeys(bucket, LogPrefix); len(ks) > 0 && ks[0] <= m {
		t.Fatalf("commit objects %v left after checkpoint %d", ks, m)
	}
}

// TestFoldFitsItsMemoryBound: the fold of batchlog.DefaultMaxProducerWindows producer windows
// of five batches each, and its partition entry encoded as a checkpoint holds it, take less
// heap than FoldMemoryBound.
func TestFoldFitsItsMemoryBound(t *testing.T) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f := &partFold{windows: map[int64]*idem.State{}}
	for pid := int64(0); pid < batchlog.DefaultMaxProducerWindows; pid++ {
		for s := int32(0); s < idem.NumBatchesToRetain; s++ {
			foldBatch(f, pid*10+int64(s), wire.BatchHeader{ProducerID: pid, BaseSequence: s, NumRecords: 1}, nil, 1)
		}
	}
	enc := encodePart(nil, partRef{index: 0}, f)
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d windows: fold and its encoding %d bytes (%d encoded)", len(f.windows), used, len(enc))
	if used > FoldMemoryBound {
		t.Fatalf("%d windows take %d bytes, past FoldMemoryBound (%d)", len(f.windows), used, FoldMemoryBound)
	}
	runtime.KeepAlive(f)
	runtime.KeepAlive(enc)
}

// TestCheckpointsLetGoOfDeletions: the deletions of groups, offsets and transactional ids
// are carried by the next checkpoint and then leave the fold, so groups made and deleted by
// the thousand leave nothing behind in it; a restore from the later checkpoint still has none
// of what was deleted and all that was kept.
func TestCheckpointsLetGoOfDeletions(t *testing.T) {
	bucket := objstore.NewMemory()
	n := openTiered(t, t.TempDir(), bucket, 0, false)
	tp := n.topic("d", true)
	p0 := tp.Partitions[0]
	gs, ts := n.c.GroupStore(n.l.Meta()), n.c.TxnStore(n.l.Meta())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d0, d1 := meta.OffsetKey{Topic: "d"}, meta.OffsetKey{Topic: "d", Partition: 1}
	const flood = 1000
	ops := make(chan func() error, flood)
	for i := range flood {
		g := fmt.Sprintf("flood-%d", i)
		ops <- func() error { // in order, as under the group's lock
			if err := gs.CommitOffsets(g, map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: int64(i)}}); err != nil {
				return err
			}
			return gs.DeleteGroup(g)
		}
	}
	close(ops)
	// Many groups at once, so that many changes share a commit window.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range ops {
				if err := op(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	must(<-errs)
	must(gs.CommitOffsets("kept", map[meta.OffsetKey]meta.CommittedOffset{d0: {Offset: 3}, d1: {Offset: 4}}))
	must(gs.DeleteOffsets("kept", []meta.OffsetKey{d1}))
	must(ts.SaveTxn("gone", []byte("record")))
	must(ts.DeleteTxn("gone"))
	must(ts.SaveTxn("tx", []byte("record")))

	deletions := func(seq uint64) (n int) {
		t.Helper()
		b, _, err := bucket.Get(context.Background(), CheckpointKey(seq))
		if err != nil {
			t.Fatal(err)
		}
		_, entries, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			switch -e.Partition {
			case StateGroupOffsets:
				if op, err := decodeGroupOp(e.State); err == nil && op.Op != opCommit {
					n++
				}
			case StateTxn:
				if op, _, _, err := decodeTxnOp(e.State); err == nil && op == opTxnDelete {
					n++
				}
			}
		}
		return n
	}
	n.put(appendOf(p0, 7, 0, 1, 'a'))
	n.upload()
	first := n.checkpoint()
	if first == 0 {
		t.Fatal("no checkpoint")
	}
	if got := deletions(first); got != flood+2 {
		t.Fatalf("the first checkpoint carries %d deletions, want %d (each group's, kept's offset, the id's)", got, flood+2)
	}
	n.put(appendOf(p0, 7, 1, 1, 'b'))
	n.upload()
	second := n.checkpoint()
	if second <= first {
		t.Fatalf("no second checkpoint (%d after %d)", second, first)
	}
	if got := deletions(second); got != 0 {
		t.Fatalf("the second checkpoint carries %d deletions again", got)
	}
	n.c.ck.mu.Lock()
	groups, txns := len(n.c.ck.state.groups), len(n.c.ck.state.txns)
	n.c.ck.mu.Unlock()
	if groups != 1 || txns != 1 {
		t.Fatalf("the fold holds %d groups and %d transactional ids after the deletions were carried, want 1 and 1", groups, txns)
	}
	n.close()
	for _, k := range logKeys(bucket, CheckpointPrefix) {
		if k != second {
			t.Fatalf("checkpoint %d left beside %d", k, second)
		}
	}

	r := openTiered(t, t.TempDir(), bucket, 0, true)
	defer r.close()
	all, err := r.l.Meta().LoadGroups()
	must(err)
	if len(all) != 1 || all["kept"] == nil {
		t.Fatalf("restored groups %v, want kept alone", slices.Collect(maps.Keys(all)))
	}
	if got := all["kept"].Offsets; len(got) != 1 || got[d0].Offset != 3 {
		t.Fatalf("kept restored with %+v", got)
	}
	stored, err := r.l.Meta().LoadTxns()
	must(err)
	if len(stored) != 1 || stored["tx"] == nil {
		t.Fatalf("restored transactional ids %v, want tx alone", slices.Collect(maps.Keys(stored)))
	}
}
