package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/objstore"
)

// fakeWriter is a lease as the tier sees it.
type fakeWriter struct {
	epoch     uint64
	remaining time.Duration
}

func (w *fakeWriter) Epoch() uint64            { return w.epoch }
func (w *fakeWriter) Remaining() time.Duration { return w.remaining }

func openLog(t *testing.T) (*batchlog.Log, *meta.Store) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	cat, err := meta.Open(meta.Options{Dir: dir, MemTableSize: 8 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l, err := batchlog.Open(batchlog.Options{Dir: dir, Meta: cat, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // closes the catalog too
	return l, cat
}

// putObject writes an object of the test batches [base, end) under key.
func putObject(t *testing.T, b objstore.Bucket, key string, base, end int) {
	t.Helper()
	refs, _, read := testBatches(end, 700)
	data, err := io.ReadAll(newObjectBody(refs[base:end], read))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

// A node that is not the writer changes nothing in the bucket; the clean of epoch e deletes
// orphans of epochs up to e and never a key of a newer epoch.
func TestCleanKeepsNewerEpochsAndNotWriterWritesNothing(t *testing.T) {
	l, cat := openLog(t)
	bucket := objstore.NewMemory()
	id := [16]byte{7}
	keys := []string{
		objectKey("gone", id, 0, 0, 10, 0), objectKey("gone", id, 0, 10, 20, 1), objectKey("gone", id, 0, 20, 30, 2),
		objectKey("gone", id, 0, 30, 40, 3), descriptionKeyEpoch("gone", id, 5, 1), descriptionKeyEpoch("gone", id, 6, 3),
	}
	for _, k := range keys {
		putObject(t, bucket, k, 0, 1)
	}
	w := &fakeWriter{epoch: 2}
	tr, err := Open(l, cat, Config{Bucket: bucket, Writer: w, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.RunOnce(context.Background(), time.Now()); !errors.Is(err, errNotWriter) {
		t.Fatalf("pass while not the writer: %v, want errNotWriter", err)
	}
	if bucket.Calls(objstore.OpDelete) != 0 || bucket.Calls(objstore.OpList) != 0 || bucket.Calls(objstore.OpPut) != int64(len(keys)) {
		t.Fatalf("a node that is not the writer called the bucket: %d lists, %d deletes", bucket.Calls(objstore.OpList), bucket.Calls(objstore.OpDelete))
	}
	w.remaining = time.Minute
	if err := tr.RunOnce(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	want := []string{keys[3], keys[5]}
	slices.Sort(want)
	if got := bucket.Keys(); !slices.Equal(got, want) {
		t.Fatalf("after the clean of epoch 2 the bucket holds %v, want only the newer epoch's %v", got, want)
	}
}

// A restore takes, where objects overlap, the newest epoch's, and never an older epoch's
// object after a newer one's.
func TestRestorePrefersNewerEpochs(t *testing.T) {
	l, cat := openLog(t)
	bucket := objstore.NewMemory()
	id := [16]byte{8}
	js := fmt.Sprintf(`{"name":"t","id":"%x","partitions":1,"configs":{"remote.storage.enable":"true"}}`, id)
	if err := bucket.Put(context.Background(), descriptionKeyEpoch("t", id, 1, 1), bytes.NewReader([]byte(js)), int64(len(js))); err != nil {
		t.Fatal(err)
	}
	putObject(t, bucket, objectKey("t", id, 0, 0, 10, 0), 0, 10)   // before leases
	putObject(t, bucket, objectKey("t", id, 0, 10, 20, 1), 10, 20) // epoch 1
	putObject(t, bucket, objectKey("t", id, 0, 20, 35, 1), 20, 35) // epoch 1 after epoch 2 took: loses to it
	putObject(t, bucket, objectKey("t", id, 0, 20, 30, 2), 20, 30) // epoch 2
	putObject(t, bucket, objectKey("t", id, 0, 35, 40, 1), 35, 40) // epoch 1 after epoch 2's: never read
	topics, objects, err := Restore(context.Background(), l, cat, bucket, slog.New(slog.DiscardHandler))
	if err != nil || topics != 1 || objects != 3 {
		t.Fatalf("restore: %d topics, %d objects, %v; want 1 and 3", topics, objects, err)
	}
	tp, ok := l.Topic("t")
	if !ok {
		t.Fatal("topic not restored")
	}
	var got []string
	err = cat.RemoteObjects(func(o meta.RemoteObject) error {
		got = append(got, o.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{objectKey("t", id, 0, 0, 10, 0), objectKey("t", id, 0, 10, 20, 1), objectKey("t", id, 0, 20, 30, 2)}
	if !slices.Equal(got, want) || tp.Partitions[0].HighWatermark() != 30 {
		t.Fatalf("restored %v, next offset %d; want %v and 30", got, tp.Partitions[0].HighWatermark(), want)
	}
}

// TestDescribeTopicKeyCarriesTheEpoch: a topic description is written under the writer's
// epoch, so that one a fenced writer (an older epoch) PUTs later, with a higher sequence,
// never outranks it at a restore.
func TestDescribeTopicKeyCarriesTheEpoch(t *testing.T) {
	l, _ := openLog(t)
	tp, err := l.CreateTopic("d", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	bucket := objstore.NewMemory()
	key, err := DescribeTopic(context.Background(), bucket, tp, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, epoch, ok := parseDescriptionKey(key); !ok || epoch != 2 {
		t.Fatalf("description key %q: epoch %d (parsed %v), want 2", key, epoch, ok)
	}
	late := descriptionKeyEpoch(tp.Name, tp.ID, time.Now().Add(time.Hour).UnixNano(), 1)
	if !newerDescription(key, late) || newerDescription(late, key) {
		t.Fatalf("a later description of epoch 1 (%s) outranks epoch 2's (%s)", late, key)
	}
}
