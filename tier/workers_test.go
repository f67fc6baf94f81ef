package tier

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/objstore"
)

// meetingBucket holds each PUT of a tier object until another is in flight beside it (or
// wait has passed), and counts the most in flight at once since reset.
type meetingBucket struct {
	objstore.Bucket

	mu       sync.Mutex
	wait     time.Duration
	inFlight int
	most     int
	met      chan struct{}
	onPut    func() // called at each tier object's PUT, before it waits
}

func (b *meetingBucket) reset(wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wait, b.most, b.met = wait, 0, make(chan struct{})
}

func (b *meetingBucket) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	if strings.HasSuffix(key, ".json") {
		return b.Bucket.Put(ctx, key, body, size)
	}
	b.mu.Lock()
	b.inFlight++
	b.most = max(b.most, b.inFlight)
	if b.inFlight == 2 {
		close(b.met)
		b.met = make(chan struct{}) // the next pair meets anew
	}
	met, wait, onPut := b.met, b.wait, b.onPut
	if b.inFlight >= 2 {
		met = nil
	}
	b.mu.Unlock()
	if onPut != nil {
		onPut()
	}
	if met != nil {
		select {
		case <-met:
		case <-time.After(wait):
		}
	}
	err := b.Bucket.Put(ctx, key, body, size)
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	return err
}

// dataBatch is a record-batch-shaped value of one record (the log reads only the header).
func dataBatch(tag byte) []byte {
	b := make([]byte, 62)
	b[61] = tag
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[57:], 1)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestUploadsCatchUpSideBySide: a pass uploads one partition at a time while the tier keeps
// up, and uploadWorkers partitions at a time from the moment it finds a partition with two
// objects' worth of batches due, and in the pass after; every object is recorded either way.
func TestUploadsCatchUpSideBySide(t *testing.T) {
	l, cat := openLog(t)
	tp, err := l.CreateTopic("t", 4, map[string]string{"remote.storage.enable": "true"})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	produce := func(perPartition int) {
		t.Helper()
		for range perPartition {
			done := make(chan struct{})
			r := &batchlog.Request{Done: func(*batchlog.Request) { close(done) }}
			for i, p := range tp.Partitions {
				r.Appends = append(r.Appends, batchlog.Append{Partition: p, Batch: dataBatch(byte('a' + i)), ProducerID: -1, NumRecords: 1})
			}
			l.Submit(r)
			<-done
			for _, a := range r.Appends {
				if a.Err != 0 {
					t.Fatalf("append refused: error code %d", a.Err)
				}
			}
		}
		next += int64(perPartition)
	}
	bucket := &meetingBucket{Bucket: objstore.NewMemory()}
	tr, err := Open(l, cat, Config{Bucket: bucket, Writer: &fakeWriter{epoch: 1, remaining: time.Minute},
		ObjectBytes: 100, Logger: slog.New(slog.DiscardHandler)}) // two test batches an object
	if err != nil {
		t.Fatal(err)
	}
	pass := func(perPartition int, wait time.Duration, wantMost int) {
		t.Helper()
		produce(perPartition)
		bucket.reset(wait)
		if err := tr.RunOnce(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
		if (wantMost == 1) != (bucket.most == 1) {
			t.Fatalf("%d tier PUTs in flight at once at most, want %d", bucket.most, wantMost)
		}
		for _, p := range tp.Partitions {
			if end := tr.UploadedEnd(p); end != next {
				t.Fatalf("partition %d uploaded to %d, want %d", p.Index, end, next)
			}
		}
	}
	// The lag metric follows the listings and uploads as the pass goes, not only its end:
	// at the first PUT of a pass it holds that partition's batches.
	var lagAtFirstPut int64 = -1
	bucket.onPut = func() {
		if lagAtFirstPut < 0 {
			lagAtFirstPut = tr.Stats().LagBytes
		}
	}
	pass(2, 50*time.Millisecond, 1) // an object's worth a partition: one at a time
	if lagAtFirstPut <= 0 {
		t.Fatalf("the upload lag at the pass's first PUT: %d bytes, want its partition's batches", lagAtFirstPut)
	}
	bucket.onPut = nil
	pass(4, 2*time.Second, uploadWorkers) // two objects' worth: side by side from then on
	pass(2, 2*time.Second, uploadWorkers) // still, after a pass that was behind; caught up
	pass(2, 50*time.Millisecond, 1)       // one at a time again
}

// TestUploadsGiveWayToCommitPuts: while the tier keeps up, an upload waits before its chunks
// until no commit PUT is in flight on Config.Gate, and at most gateWait; once a partition has
// two objects' worth due, the pass does not wait.
func TestUploadsGiveWayToCommitPuts(t *testing.T) {
	l, cat := openLog(t)
	tp, err := l.CreateTopic("t", 1, map[string]string{"remote.storage.enable": "true"})
	if err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	next := int64(0)
	produce := func(n int) {
		t.Helper()
		for range n {
			done := make(chan struct{})
			r := &batchlog.Request{Done: func(*batchlog.Request) { close(done) },
				Appends: []batchlog.Append{{Partition: p, Batch: dataBatch('a'), ProducerID: -1, NumRecords: 1}}}
			l.Submit(r)
			<-done
			if r.Appends[0].Err != 0 {
				t.Fatalf("append refused: error code %d", r.Appends[0].Err)
			}
		}
		next += int64(n)
	}
	gate := &objstore.PutGate{}
	tr, err := Open(l, cat, Config{Bucket: objstore.NewMemory(), Writer: &fakeWriter{epoch: 1, remaining: time.Minute},
		ObjectBytes: 100, Gate: gate, Logger: slog.New(slog.DiscardHandler)}) // two test batches an object
	if err != nil {
		t.Fatal(err)
	}
	pass := func() time.Duration {
		t.Helper()
		began := time.Now()
		if err := tr.RunOnce(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
		if end := tr.UploadedEnd(p); end != next {
			t.Fatalf("uploaded to %d, want %d", end, next)
		}
		return time.Since(began)
	}

	// Keeping up, a commit PUT in flight: the upload waits for its end.
	produce(2)
	gate.Begin()
	go func() {
		time.Sleep(60 * time.Millisecond)
		gate.End()
	}()
	if d := pass(); d < 60*time.Millisecond {
		t.Fatalf("the pass took %v: it did not wait for the commit PUT in flight (60 ms)", d)
	}
	if n, d := gate.Waited(); n != 1 || d < 60*time.Millisecond {
		t.Fatalf("Waited: %d, %v; want 1 wait of at least 60 ms", n, d)
	}

	// A commit PUT that does not end: the upload waits gateWait, then goes.
	produce(2)
	gate.Begin()
	if d := pass(); d < gateWait {
		t.Fatalf("the pass took %v, want at least gateWait (%v)", d, gateWait)
	}
	if n, _ := gate.Waited(); n != 2 {
		t.Fatalf("%d waits, want 2", n)
	}

	// Behind (two objects' worth due), with the PUT still in flight: no wait, in this pass or
	// the next; once a pass has found the tier caught up, the one after gives way again.
	produce(4)
	pass()
	produce(2)
	pass()
	if n, _ := gate.Waited(); n != 2 {
		t.Fatalf("%d waits after passes behind and just after, want still 2", n)
	}
	produce(2)
	pass()
	if n, _ := gate.Waited(); n != 3 {
		t.Fatalf("%d waits once caught up, want 3", n)
	}
	gate.End()
}
