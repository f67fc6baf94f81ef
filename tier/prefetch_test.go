package tier

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/objstore"
)

// readCounting is a bucket that counts its range reads by key.
type readCounting struct {
	objstore.Bucket
	mu    sync.Mutex
	reads map[string]int
}

func (b *readCounting) ReadAt(ctx context.Context, key string, off int64, dst []byte) error {
	b.mu.Lock()
	b.reads[key]++
	b.mu.Unlock()
	return b.Bucket.ReadAt(ctx, key, off, dst)
}

// objectReads is how many range reads of tiered objects (not descriptions) b made, and
// zeroes the counts.
func (b *readCounting) objectReads() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, n := range b.reads {
		if _, ok := parseObjectKey(k); ok {
			out[k] = n
		}
	}
	b.reads = map[string]int{}
	return out
}

// cacheBucket is a bucket holding one two-partition topic, "c", of six objects, and its id.
func cacheBucket(t *testing.T) (*readCounting, [16]byte) {
	t.Helper()
	mem := objstore.NewMemory()
	id := [16]byte{9}
	js := fmt.Sprintf(`{"name":"c","id":"%x","partitions":2,"configs":{"remote.storage.enable":"true"}}`, id)
	if err := mem.Put(context.Background(), descriptionKeyEpoch("c", id, 1, 1), bytes.NewReader([]byte(js)), int64(len(js))); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		for base := 0; base < 30; base += 10 {
			putObject(t, mem, objectKey("c", id, p, int64(base), int64(base+10), 1), base, base+10)
		}
	}
	return &readCounting{Bucket: mem, reads: map[string]int{}}, id
}

// restored is what a restore of topic c gave: per partition its log start and next offset,
// and the remote objects' records without their UploadedMs (the time of the restore).
func restored(t *testing.T, l *batchlog.Log, cat *meta.Store) ([][2]int64, []meta.RemoteObject) {
	t.Helper()
	tp, ok := l.Topic("c")
	if !ok {
		t.Fatal("topic c not restored")
	}
	var offs [][2]int64
	for _, p := range tp.Partitions {
		offs = append(offs, [2]int64{p.LogStartOffset(), p.HighWatermark()})
	}
	var objs []meta.RemoteObject
	err := cat.RemoteObjects(func(o meta.RemoteObject) error {
		if o.UploadedMs <= 0 {
			t.Errorf("record of %s without UploadedMs", o.Key)
		}
		o.UploadedMs = 0
		objs = append(objs, o)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return offs, objs
}

// TestRestoreWithFullCacheReadsNoCachedObject: a restore whose cache holds every object's
// record reads none of them, reads only an object uploaded after the cache's refresh, and
// restores what a restore without a cache restores.
func TestRestoreWithFullCacheReadsNoCachedObject(t *testing.T) {
	ctx, quiet := context.Background(), slog.New(slog.DiscardHandler)
	bucket, id := cacheBucket(t)
	c := NewRecordCache()
	if n, err := c.Refresh(ctx, bucket); err != nil || n != 6 {
		t.Fatalf("refresh read %d records (%v), want 6", n, err)
	}
	bucket.objectReads()
	if n, err := c.Refresh(ctx, bucket); err != nil || n != 0 || len(bucket.objectReads()) != 0 {
		t.Fatalf("a refresh with nothing new read %d records (%v)", n, err)
	}
	late := objectKey("c", id, 1, 30, 40, 1)
	putObject(t, bucket.Bucket, late, 30, 40)

	l1, cat1 := openLog(t)
	if topics, objects, err := Restore(ctx, l1, cat1, bucket, quiet); err != nil || topics != 1 || objects != 7 {
		t.Fatalf("restore without a cache: %d topics, %d objects, %v; want 1 and 7", topics, objects, err)
	}
	if reads := bucket.objectReads(); len(reads) != 7 {
		t.Fatalf("a restore without a cache read %d objects, want 7", len(reads))
	}
	l2, cat2 := openLog(t)
	if topics, objects, err := RestoreWith(ctx, l2, cat2, bucket, c, quiet); err != nil || topics != 1 || objects != 7 {
		t.Fatalf("restore with a cache: %d topics, %d objects, %v; want 1 and 7", topics, objects, err)
	}
	if reads := bucket.objectReads(); len(reads) != 1 || reads[late] != 2 {
		t.Fatalf("a restore with a cache read %v, want only the object uploaded after its refresh (trailer and footer)", reads)
	}
	if s := c.Stats(); s.Hits != 6 || s.Records != 6 || s.Read != 6 {
		t.Fatalf("cache stats %+v, want 6 records, 6 read, 6 hits", s)
	}
	offs1, objs1 := restored(t, l1, cat1)
	offs2, objs2 := restored(t, l2, cat2)
	if !slices.Equal(offs1, offs2) || !slices.Equal(objs1, objs2) || !slices.Equal(offs2, [][2]int64{{0, 30}, {0, 40}}) {
		t.Fatalf("with a cache restored %v %v; without %v %v", offs2, objs2, offs1, objs1)
	}
}

// TestRecordCacheRereadsAnObjectOfAnotherSize: a record held for a key under another size
// than the listing's is neither used by a restore nor kept by a refresh, which reads it again.
func TestRecordCacheRereadsAnObjectOfAnotherSize(t *testing.T) {
	ctx, quiet := context.Background(), slog.New(slog.DiscardHandler)
	bucket, id := cacheBucket(t)
	c := NewRecordCache()
	if _, err := c.Refresh(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	bucket.objectReads()
	key := objectKey("c", id, 0, 10, 20, 1)
	c.mu.Lock()
	r := c.recs[key]
	r.size++
	r.o.Size++
	c.recs[key] = r
	c.mu.Unlock()

	l, cat := openLog(t)
	if _, objects, err := RestoreWith(ctx, l, cat, bucket, c, quiet); err != nil || objects != 6 {
		t.Fatalf("restore: %d objects, %v; want 6", objects, err)
	}
	if reads := bucket.objectReads(); len(reads) != 1 || reads[key] != 2 {
		t.Fatalf("restore read %v, want only %s, whose cached size differs", reads, key)
	}
	_, objs := restored(t, l, cat)
	for _, o := range objs {
		if o.Key == key && o.Size != r.size-1 {
			t.Fatalf("restored the record of %s with size %d, want the listing's %d", key, o.Size, r.size-1)
		}
	}
	if n, err := c.Refresh(ctx, bucket); err != nil || n != 1 {
		t.Fatalf("refresh read %d records (%v), want the one of another size", n, err)
	}
	if reads := bucket.objectReads(); len(reads) != 1 || reads[key] != 2 {
		t.Fatalf("refresh read %v, want only %s", reads, key)
	}
	if o, ok := c.record(keyedObject{key: key, size: r.size - 1}); !ok || o.Size != r.size-1 {
		t.Fatalf("after the refresh the cache holds %+v (%v), want the listing's size %d", o, ok, r.size-1)
	}
}

// TestRecordCacheDropsDeletedKeys: a refresh drops the records of keys no longer listed
// (objects the retention or the clean deleted) and reads nothing it holds.
func TestRecordCacheDropsDeletedKeys(t *testing.T) {
	ctx := context.Background()
	bucket, id := cacheBucket(t)
	c := NewRecordCache()
	if _, err := c.Refresh(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	gone := []string{objectKey("c", id, 0, 0, 10, 1), objectKey("c", id, 1, 0, 10, 1)}
	for _, k := range gone {
		if err := bucket.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	bucket.objectReads()
	if n, err := c.Refresh(ctx, bucket); err != nil || n != 0 {
		t.Fatalf("refresh read %d records (%v), want none", n, err)
	}
	if reads := bucket.objectReads(); len(reads) != 0 {
		t.Fatalf("refresh read %v, want nothing", reads)
	}
	if s := c.Stats(); s.Records != 4 {
		t.Fatalf("cache holds %d records after 2 of 6 objects were deleted, want 4", s.Records)
	}
	for _, k := range gone {
		c.mu.Lock()
		_, ok := c.recs[k]
		c.mu.Unlock()
		if ok {
			t.Fatalf("cache still holds the record of deleted %s", k)
		}
	}
}
