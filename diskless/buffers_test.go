package diskless

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/objstore"
	"inlet/wire"
)

// TestObjectsReferenceLargeBatches: a batch of smallBatch bytes or more stays where it lies
// (the object refers to the request's frame) and a smaller one is copied into the object's
// chunks; the buffer holds only the header and the entries' heads; all the batches' bytes count
// towards CommitBytes, so a group that would pass it opens the next object; detach gives an
// object copies of its own; a landed object's buffer and chunks are taken by the next one.
func TestObjectsReferenceLargeBatches(t *testing.T) {
	const commitBytes = 1 << 20
	c := New(Config{Bucket: objstore.NewMemory(), CommitBytes: commitBytes})
	p := &batchlog.Partition{Topic: "d"}
	large, small := sizedBatch(smallBatch, 0), batch(1, 0, 1, 'a')
	c.Commit(&batchlog.DisklessGroup{Appends: []*batchlog.Append{{Partition: p, Batch: large}, {Partition: p, Batch: small}}})
	first := c.objects[0]
	if len(first.refs) != 2 || &first.refs[0].batch[0] != &large[0] || first.refs[0].owned {
		t.Fatalf("the large batch was not referenced in place (%d references)", len(first.refs))
	}
	if r := first.refs[1]; !r.owned || &r.batch[0] == &small[0] || !bytes.Equal(r.batch, small) ||
		len(first.chunks) != 1 || &first.chunks[0][:1][0] != &r.batch[0] {
		t.Fatal("the small batch was not copied into the object's chunk")
	}
	if want := format.HeaderLen + 2*format.EntryLen; len(first.buf) != want {
		t.Fatalf("the object's buffer holds %d bytes, want the header and two heads: %d", len(first.buf), want)
	}
	if first.size() != int64(format.HeaderLen+2*format.EntryLen+len(small)+len(large)) {
		t.Fatalf("size %d", first.size())
	}
	per := (commitBytes - int(first.size())) / (entryOverhead + len(large))
	g := &batchlog.DisklessGroup{}
	for range per {
		g.Appends = append(g.Appends, &batchlog.Append{Partition: p, Batch: large})
	}
	c.Commit(g)
	if len(c.objects) != 1 {
		t.Fatalf("%d objects after filling one to CommitBytes", len(c.objects))
	}
	c.Commit(&batchlog.DisklessGroup{Appends: []*batchlog.Append{{Partition: p, Batch: large}}})
	if len(c.objects) != 2 || first.size() > commitBytes {
		t.Fatalf("a group past CommitBytes went into the full object (%d objects, %d bytes)", len(c.objects), first.size())
	}
	c.mu.Lock()
	first.detach()
	c.mu.Unlock()
	for i, r := range first.refs {
		if i == 1 {
			continue // the small batch, in the chunk
		}
		if &r.batch[0] == &large[0] || !bytes.Equal(r.batch, large) || !r.owned {
			t.Fatalf("reference %d after detach: still the frame's bytes, or not a copy of them", i)
		}
	}
	landed, chunk := first.buf[:1], first.chunks[0][:1]
	c.mu.Lock()
	c.objects = c.objects[1:]
	c.recycle(first)
	c.objects[0].sealed = true
	c.mu.Unlock()
	c.Commit(&batchlog.DisklessGroup{Appends: []*batchlog.Append{{Partition: p, Batch: small}}})
	if len(c.objects) != 2 || &c.objects[1].buf[:1][0] != &landed[0] || &c.objects[1].chunks[0][:1][0] != &chunk[0] {
		t.Fatal("the next object did not take the landed object's buffer and chunk")
	}
}

// TestIdleKeepsOneBuffer: the buffers and chunks of objects landed together are kept for the
// next objects while groups keep coming; once the loop has been idle for idleTrim, one buffer is
// kept and the chunks are let go.
func TestIdleKeepsOneBuffer(t *testing.T) {
	g := newGated()
	n := openNode(t, t.TempDir(), g, Config{CommitBytes: 1 << 20}, false)
	defer n.close()
	p := n.topic("d", true).Partitions[0]
	release := g.holdPut(1)
	first := n.send(appendOf(p, -1, 0, 1, 1))
	eventually(t, "object 1's PUT started", func() bool { return g.tries(1) == 1 })
	var rest []*produce
	for i := range 3 {
		rest = append(rest, n.send(appendOf(p, -1, 0, 1, byte(2+i))))
		eventually(t, "the next object landed", func() bool { return g.has(uint64(2 + i)) })
	}
	release()
	for _, pr := range append(rest, first) {
		pr.wait(t, 5*time.Second)
	}
	free := func() (int, int) {
		n.c.mu.Lock()
		defer n.c.mu.Unlock()
		return len(n.c.free), len(n.c.freeChunks)
	}
	if k, ch := free(); k < 3 || ch < 3 {
		t.Fatalf("%d free buffers and %d chunks after 4 objects landed together, want them kept", k, ch)
	}
	time.Sleep(idleTrim + 200*time.Millisecond)
	if k, ch := free(); k != 1 || ch != 0 {
		t.Fatalf("%d free buffers and %d chunks after %v idle, want 1 and none", k, ch, idleTrim)
	}
}

// largeAppend is appendOf with a batch of size bytes: past smallBatch, the object refers to
// it where it lies, as to a request's frame.
func largeAppend(p *batchlog.Partition, pid int64, seq, records int32, tag byte, size int) batchlog.Append {
	b := batch(pid, seq, records, tag)
	b = append(b, make([]byte, size-len(b))...)
	for i := 62; i < size; i++ {
		b[i] = byte(i) ^ tag
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return batchlog.Append{Partition: p, Batch: b, ProducerID: pid, BaseSequence: seq, NumRecords: records}
}

// TestTimedOutFrameIsCopiedFirst: a request answered REQUEST_TIMED_OUT while the bucket is
// down gives its frame back (here: the test writes over its batch, as the next request in
// the pooled buffer would), and the object that lands once the bucket is back still holds the
// batch as it was acknowledged to the log: the reaper copied it before answering.
func TestTimedOutFrameIsCopiedFirst(t *testing.T) {
	m := objstore.NewMemory()
	n := openNode(t, t.TempDir(), m, Config{RequestTimeout: 300 * time.Millisecond}, false)
	defer n.close()
	d := n.topic("d", true)
	m.SetDown(errDown)
	a := largeAppend(d.Partitions[0], 9, 0, 4, 1, 64<<10)
	pr := n.send(a)
	if got := pr.wait(t, 5*time.Second); got.Err != wire.ErrRequestTimedOut {
		t.Fatalf("err %d, want REQUEST_TIMED_OUT", got.Err)
	}
	frame := pr.r.Appends[0].Batch
	want := bytes.Clone(frame)
	for i := range frame {
		frame[i] = 0xee
	}
	m.SetDown(nil)
	eventually(t, "the object landed", func() bool { return len(m.Keys()) > 0 && len(objects(t, m)) == 1 })
	es := objects(t, m)[0] // Decode checks the object's CRC
	if len(es) != 1 || !bytes.Equal(es[0].Batch, want) {
		t.Fatal("the landed object does not hold the batch as it was before its request was answered")
	}
}

// TestPutInFlightHoldsItsFrames: a request past the request timeout whose object's PUT is in
// flight is not answered until that PUT has ended: its frame is being sent. Object 1's PUT
// starts at once and object 2's (the large batch's) a commit interval later, so that the
// request's timeout comes while object 2's PUT, held, is still in flight; its own timeout ends
// it a commit interval after that.
func TestPutInFlightHoldsItsFrames(t *testing.T) {
	g := newGated()
	n := openNode(t, t.TempDir(), g, Config{RequestTimeout: 300 * time.Millisecond, CommitInterval: 150 * time.Millisecond}, false)
	defer n.close()
	p := n.topic("d", true).Partitions[0]
	defer g.holdPut(1)()
	defer g.holdPut(2)()
	n.send(appendOf(p, -1, 0, 1, 1))
	eventually(t, "object 1's PUT started", func() bool { return g.tries(1) == 1 })
	pr := n.send(largeAppend(p, -1, 0, 1, 2, 64<<10))
	if got := pr.wait(t, 5*time.Second); got.Err != wire.ErrRequestTimedOut {
		t.Fatalf("err %d, want REQUEST_TIMED_OUT", got.Err)
	}
	g.mu.Lock()
	ended, ok := g.ended[LogKey(2)]
	g.mu.Unlock()
	if !ok || pr.at.Before(ended) {
		t.Fatalf("answered at %v, before object 2's PUT, which sends its frame, ended (%v, %v)", pr.at, ended, ok)
	}
}
