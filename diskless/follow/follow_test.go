package follow

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless"
	"inlet/objstore"
	"inlet/segfs"
	"inlet/tier"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// counting is a bucket that counts the GETs of each key, and can hold those of commit objects.
type counting struct {
	objstore.Bucket
	mu   sync.Mutex
	gets map[string]int
	hold chan struct{} // while set, a GET of a commit object waits until it is closed
}

func newCounting(b objstore.Bucket) *counting { return &counting{Bucket: b, gets: map[string]int{}} }

func (c *counting) ReadAt(ctx context.Context, key string, off int64, dst []byte) error {
	c.mu.Lock()
	c.gets[key]++
	hold := c.hold
	c.mu.Unlock()
	if hold != nil && strings.HasPrefix(key, diskless.LogPrefix) {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.Bucket.ReadAt(ctx, key, off, dst)
}

// logGets is the GETs of commit objects.
func (c *counting) logGets() map[uint64]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uint64]int{}
	for k, n := range c.gets {
		if seq, ok := diskless.ParseNumbered(diskless.LogPrefix, k); ok {
			out[seq] = n
		}
	}
	return out
}

// batch is a record batch of one record of no producer, tagged, its length and CRC right.
func batch(tag byte) []byte {
	b := make([]byte, 62)
	b[61] = tag
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[57:], 1)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

type completion chan struct{}

func (c completion) Completed(*batchlog.Request) { close(c) }

// writer is a node writing a diskless topic of two partitions to bucket.
type writer struct {
	l *batchlog.Log
	c *diskless.Committer
	t *batchlog.Topic
}

func openLog(t *testing.T, bucket objstore.Bucket, cache diskless.ObjectCache, restore bool) (*batchlog.Log, *diskless.Committer, diskless.RecoverStats, error) {
	t.Helper()
	c := diskless.New(diskless.Config{Bucket: bucket, Logger: quiet, CommitInterval: 5 * time.Millisecond, CheckpointInterval: -1, Cache: cache})
	l, err := batchlog.Open(batchlog.Options{Dir: t.TempDir(), MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Diskless: c, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if restore {
		if _, _, err := tier.Restore(ctx, l, l.Meta(), bucket, quiet); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.Recover(ctx, l)
	return l, c, st, err
}

func newWriter(t *testing.T, bucket objstore.Bucket) *writer {
	l, c, _, err := openLog(t, bucket, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := l.CreateTopicBy("t", 2, map[string]string{"diskless.enable": "true"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Describe(context.Background(), tp); err != nil {
		t.Fatal(err)
	}
	return &writer{l, c, tp}
}

// produce writes n batches one at a time, each acknowledged (so each in a commit object of
// its own) before the next.
func (w *writer) produce(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		done := make(completion)
		r := &batchlog.Request{Completion: done, Appends: []batchlog.Append{{Partition: w.t.Partitions[i%2], Batch: batch(byte(i)), ProducerID: -1, BaseSequence: -1, NumRecords: 1}}}
		w.l.Submit(r)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("produce not acknowledged")
		}
		if r.Appends[0].Err != 0 {
			t.Fatalf("produce: error %d", r.Appends[0].Err)
		}
	}
}

// logObjects is the commit objects in m: number -> bytes.
func logObjects(m *objstore.Memory) map[uint64][]byte {
	out := map[uint64][]byte{}
	for _, k := range m.Keys() {
		if n, ok := diskless.ParseNumbered(diskless.LogPrefix, k); ok {
			out[n], _ = m.Object(k)
		}
	}
	return out
}

func start(t *testing.T, bucket objstore.Bucket, dir string) *Follower {
	t.Helper()
	f, err := Start(Config{Bucket: bucket, Dir: dir, Interval: 5 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting until " + what)
		}
	}
}

// checkCopies checks that dir holds exactly the objects want, byte for byte.
func checkCopies(t *testing.T, dir string, want map[uint64][]byte) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(want) {
		t.Errorf("%d files in the copy, want %d", len(entries), len(want))
	}
	for n, b := range want {
		got, err := os.ReadFile(Cache{dir}.path(n))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("copy of object %d: %d bytes, err %v; want the bucket's %d bytes", n, len(got), err, len(b))
		}
	}
}

func TestFollowerCatchesUpAndReportsLag(t *testing.T) {
	mem := objstore.NewMemory()
	w := newWriter(t, mem)
	w.produce(t, 5)
	objs := logObjects(mem)
	var size int64
	for _, b := range objs {
		size += int64(len(b))
	}
	writes := func() int64 {
		return mem.Calls(objstore.OpPut) + mem.Calls(objstore.OpPutIf) + mem.Calls(objstore.OpDelete)
	}
	wrote := writes()
	b := newCounting(mem)
	b.hold = make(chan struct{})
	dir := filepath.Join(t.TempDir(), "follow")
	f := start(t, b, dir)
	waitFor(t, "the follower sees it is behind", func() bool { return f.Stats().Looks > 0 })
	time.Sleep(20 * time.Millisecond)
	st := f.Stats()
	if st.LagObjects != int64(len(objs)) || st.LagBytes != size || st.Behind < 20*time.Millisecond {
		t.Fatalf("behind by every object: stats %+v, want %d objects, %d bytes, behind 20ms or more", st, len(objs), size)
	}
	b.mu.Lock()
	close(b.hold)
	b.hold = nil
	b.mu.Unlock()
	waitFor(t, "the follower catches up", func() bool { return f.Stats().Objects == int64(len(objs)) })
	st = f.Stats()
	if st.LagObjects != 0 || st.LagBytes != 0 || st.Behind != 0 || st.Fetched != int64(len(objs)) || st.FetchedBytes != size || st.Bytes != size {
		t.Fatalf("caught up: stats %+v", st)
	}
	checkCopies(t, dir, objs)
	if writes() != wrote {
		t.Errorf("the bucket was written to while only the follower ran: %d writes", writes()-wrote)
	}

	// It goes on following the writer, each object read once.
	w.produce(t, 4)
	objs = logObjects(mem)
	waitFor(t, "the follower copies the new objects", func() bool { return f.Stats().Objects == int64(len(objs)) })
	checkCopies(t, dir, objs)
	for n, gets := range b.logGets() {
		if gets != 1 {
			t.Errorf("object %d read %d times, want once", n, gets)
		}
	}
	// Stopped, it is behind no more.
	f.Stop()
	if st := f.Stats(); st.LagObjects != 0 || st.Behind != 0 {
		t.Errorf("stopped: stats %+v", st)
	}
}

// TestFollowerDropsCoveredAndDeletedObjects: the copies of objects a checkpoint covers go
// (listed still or not), and so do those the writer deleted; an object a checkpoint covers is
// never read, and a restarted follower keeps its copies and drops its temporary files.
func TestFollowerDropsCoveredAndDeletedObjects(t *testing.T) {
	mem := objstore.NewMemory()
	w := newWriter(t, mem)
	w.produce(t, 6)
	objs := logObjects(mem)
	dir := filepath.Join(t.TempDir(), "follow")
	f := start(t, mem, dir)
	waitFor(t, "the follower catches up", func() bool { return f.Stats().Objects == int64(len(objs)) })

	ctx := context.Background()
	// A checkpoint of 1..3; the writer deletes 1 and 2 (not yet 3); 5 goes too.
	if err := mem.Put(ctx, diskless.CheckpointKey(3), bytes.NewReader([]byte("ck")), 2); err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint64{1, 2, 5} {
		if err := mem.Delete(ctx, diskless.LogKey(n)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the copies are dropped", func() bool { return f.Stats().Objects == int64(len(objs))-4 })
	f.Stop()
	checkCopies(t, dir, map[uint64][]byte{4: objs[4], 6: objs[6]})
	if st := f.Stats(); st.Bytes != int64(len(objs[4])+len(objs[6])) {
		t.Errorf("bytes held %d, want %d", st.Bytes, len(objs[4])+len(objs[6]))
	}

	// Restarted on the same directory, with object 4's copy gone and a temporary file left.
	if err := os.Remove(Cache{dir}.path(4)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(Cache{dir}.path(7)+tmpSuffix, []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newCounting(mem)
	f = start(t, b, dir)
	waitFor(t, "the follower catches up", func() bool { return f.Stats().Objects == 2 })
	checkCopies(t, dir, map[uint64][]byte{4: objs[4], 6: objs[6]})
	if gets := b.logGets(); len(gets) != 1 || gets[4] != 1 {
		t.Errorf("GETs of commit objects %v, want object 4 once (3 is covered, 6 copied)", gets)
	}
}

// followed is a bucket the writer wrote n objects to, and a follower's full copy of them.
func followed(t *testing.T, n int) (*objstore.Memory, string) {
	mem := objstore.NewMemory()
	w := newWriter(t, mem)
	w.produce(t, n)
	w.l.Close()
	w.c.Close()
	dir := filepath.Join(t.TempDir(), "follow")
	f := start(t, mem, dir)
	waitFor(t, "the follower catches up", func() bool { s := f.Stats(); return s.Looks > 1 && s.LagObjects == 0 })
	f.Stop()
	return mem, dir
}

// clone is a copy of m, so that two restores each find the bucket as it was.
func clone(t *testing.T, m *objstore.Memory) *objstore.Memory {
	out := objstore.NewMemory()
	for _, k := range m.Keys() {
		b, _ := m.Object(k)
		if err := out.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// contents is each partition of t's batches, as the log serves them.
func contents(t *testing.T, l *batchlog.Log) [][]byte {
	tp, ok := l.Topic("t")
	if !ok {
		t.Fatal("topic t not restored")
	}
	var out [][]byte
	for _, p := range tp.Partitions {
		b, err := l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestRecoverReadsTheCopy: a restore with a full copy reads no commit object from the bucket,
// and restores what a restore without one does.
func TestRecoverReadsTheCopy(t *testing.T) {
	const n = 8
	mem, dir := followed(t, n)
	plain := newCounting(clone(t, mem))
	l, _, want, err := openLog(t, plain, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	wantLog := contents(t, l)
	if len(plain.logGets()) < n || want.Cached != 0 {
		t.Fatalf("without a copy: GETs %v, stats %+v", plain.logGets(), want)
	}

	b := newCounting(clone(t, mem))
	l, _, st, err := openLog(t, b, Cache{dir}, true)
	if err != nil {
		t.Fatal(err)
	}
	if gets := b.logGets(); len(gets) != 0 {
		t.Errorf("with a full copy: GETs of commit objects %v, want none", gets)
	}
	if st.Objects != want.Objects || st.Replayed != want.Replayed || st.Cached != n || st.Objects != n {
		t.Errorf("with a full copy: stats %+v, without %+v", st, want)
	}
	if got := contents(t, l); !equalAll(got, wantLog) {
		t.Errorf("with a full copy the log differs")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the copy is still there after the recovery: %v", err)
	}
}

func equalAll(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestRecoverReadsABadCopyFromTheBucket: a copy cut short, grown, with a byte changed or with
// its header zeroed (what a crash can leave of a file written without fsync) is read from the
// bucket instead, and the restore is the same.
func TestRecoverReadsABadCopyFromTheBucket(t *testing.T) {
	const n, bad = 6, 3
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"TruncatedCopy", func(b []byte) []byte { return b[:len(b)-1] }},
		{"GrownCopy", func(b []byte) []byte { return append(b, 0) }},
		{"ByteChangedInABatch", func(b []byte) []byte { b[len(b)-10] ^= 1; return b }},
		{"ZeroedCopy", func(b []byte) []byte { return make([]byte, len(b)) }},
		{"EmptyCopy", func([]byte) []byte { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, dir := followed(t, n)
			l, _, want, err := openLog(t, clone(t, mem), nil, true)
			if err != nil {
				t.Fatal(err)
			}
			wantLog := contents(t, l)

			path := Cache{dir}.path(bad)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			cb := newCounting(clone(t, mem))
			l, _, st, err := openLog(t, cb, Cache{dir}, true)
			if err != nil {
				t.Fatal(err)
			}
			if gets := cb.logGets(); len(gets) != 1 || gets[bad] == 0 {
				t.Errorf("GETs of commit objects %v, want object %d's only", gets, bad)
			}
			if st.Cached != n-1 || st.Objects != want.Objects || st.Replayed != want.Replayed {
				t.Errorf("stats %+v, without a copy %+v", st, want)
			}
			if got := contents(t, l); !equalAll(got, wantLog) {
				t.Errorf("the log differs from a restore without a copy")
			}
		})
	}
}

// TestRecoverStopsOnACopyWhoseHeaderLied: a copy whose header reads right but names another
// epoch, and whose bytes then fail their CRC, chose the log on a header the bucket's object
// does not have: the restore stops, the copy dropped, and the next one reads the bucket.
func TestRecoverStopsOnACopyWhoseHeaderLied(t *testing.T) {
	mem, dir := followed(t, 4)
	path := Cache{dir}.path(2)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[15]++ // the epoch's last byte
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := openLog(t, clone(t, mem), Cache{dir}, true); err == nil || !strings.Contains(err.Error(), "local copy") {
		t.Fatalf("restore with a lying copy: err %v, want one naming the local copy", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the copy is still there: %v", err)
	}
	if _, _, st, err := openLog(t, clone(t, mem), Cache{dir}, true); err != nil || st.Cached != 0 || st.Objects != 4 {
		t.Fatalf("the next restore: stats %+v, err %v", st, err)
	}
}

// The copy is the object's bytes exactly, whatever the reader's buffer held past them: a size
// off the block boundary is written padded and cut back.
func TestWriteCopyIsExact(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{1, 48, segfs.BlockSize - 1, segfs.BlockSize, 3*segfs.BlockSize + 17, 1<<20 + 5} {
		buf := segfs.AlignedBuffer(int(blocks(size)) + segfs.BlockSize)
		for i := range buf {
			buf[i] = 0xff
		}
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i * 7)
		}
		copy(buf, want)
		name := filepath.Join(dir, fmt.Sprint(size))
		if err := writeCopy(name, buf, size); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: copy of %d bytes (err %v), not the object's", size, len(got), err)
		}
	}
}
