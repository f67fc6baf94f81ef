package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

	"inlet/wire"
)

// testBatches are n stored batches (control batches: one record each) at offsets 0..n-1, and
// a reader of them as the log's ReadBatches reads: from the batch holding from, up to chunk
// bytes, at least one batch.
func testBatches(n, chunk int) ([]batchRef, []byte, func(from int64, dst []byte) ([]byte, error)) {
	var all []byte
	var refs []batchRef
	var pos []int
	for i := 0; i < n; i++ {
		pos = append(pos, len(all))
		b := wire.AppendControlBatch(nil, 7, 0, 1, 0, int64(1000+i))
		binary.BigEndian.PutUint64(b, uint64(i))
		all = append(all, b...)
		refs = append(refs, batchRef{base: int64(i), size: len(b)})
	}
	read := func(from int64, dst []byte) ([]byte, error) {
		start := pos[from]
		end := start
		for i := int(from); i < n && (end == start || end-start+refs[i].size <= chunk); i++ {
			end += refs[i].size
		}
		return append(dst[:0], all[start:end]...), nil
	}
	return refs, all, read
}

// TestObjectBodyStreamsBatchesThenFooter: the body is the batches as stored, then a footer
// that decodes to one entry per batch; reading it again after a seek gives the same bytes.
func TestObjectBodyStreamsBatchesThenFooter(t *testing.T) {
	refs, all, read := testBatches(50, 700)
	body := newObjectBody(refs, read)
	first, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(first)) != body.size || !bytes.Equal(first[:len(all)], all) {
		t.Fatalf("body of %d bytes (size %d), data equal: %v", len(first), body.size, bytes.Equal(first[:len(all)], all))
	}
	entries, dataLen, err := parseFooter(first[len(all):])
	if err != nil || dataLen != int64(len(all)) || len(entries) != 50 {
		t.Fatalf("footer: %d entries, data %d, %v", len(entries), dataLen, err)
	}
	for i, e := range entries {
		if e.base != int64(i) || e.maxTimestamp != int64(1000+i) || e.end() != int64(i+1) {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if body.maxTimestamp != 1049 || body.lastEnd != 50 {
		t.Fatalf("max timestamp %d, end %d", body.maxTimestamp, body.lastEnd)
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	again, err := io.ReadAll(body)
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("second read differs (%v)", err)
	}
	// A read from the middle, as a retried request may make.
	if _, err := body.Seek(int64(len(all)/2), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	mid, err := io.ReadAll(body)
	if err != nil || !bytes.Equal(mid, first[len(all)/2:]) {
		t.Fatalf("read from the middle differs (%v)", err)
	}
}

// TestObjectBodyWritesItselfAsItReads: WriteTo (how an S3 bucket over plain http sends it)
// gives the bytes reading gives, from the start and from the middle after a seek, leaving the
// position at the end.
func TestObjectBodyWritesItselfAsItReads(t *testing.T) {
	refs, all, read := testBatches(50, 700)
	whole, err := io.ReadAll(newObjectBody(refs, read))
	if err != nil {
		t.Fatal(err)
	}
	body := newObjectBody(refs, read)
	var w bytes.Buffer
	if n, err := body.WriteTo(&w); err != nil || n != body.size || !bytes.Equal(w.Bytes(), whole) {
		t.Fatalf("WriteTo: %d bytes of %d, %v; equal to the read: %v", n, body.size, err, bytes.Equal(w.Bytes(), whole))
	}
	if _, err := body.Seek(int64(len(all)/2), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	w.Reset()
	if _, err := body.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), whole[len(all)/2:]) {
		t.Fatalf("WriteTo from the middle differs (%v)", err)
	}
	if at, _ := body.Seek(0, io.SeekCurrent); at != body.size {
		t.Fatalf("position %d after WriteTo, want the end %d", at, body.size)
	}
	changed := append([]batchRef(nil), refs...)
	changed[4].size++
	if _, err := newObjectBody(changed, read).WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "changed while uploaded") {
		t.Fatalf("WriteTo of a changed batch: %v", err)
	}
}

// TestObjectBodyRefusesAChangedBatch: a batch that is not what the index listed (moved,
// rewritten, gone) fails the upload instead of writing an object that lies.
func TestObjectBodyRefusesAChangedBatch(t *testing.T) {
	refs, _, read := testBatches(10, 1<<20)
	refs[4].size++ // the listing says otherwise
	_, err := io.ReadAll(newObjectBody(refs, read))
	if err == nil || !strings.Contains(err.Error(), "changed while uploaded") {
		t.Fatalf("read of a changed batch: %v", err)
	}
}

// TestObjectBodyFooterNeedsTheBatchesFirst: a reader that jumps to the footer before reading
// the batches gets an error, not a footer with entries missing.
func TestObjectBodyFooterNeedsTheBatchesFirst(t *testing.T) {
	refs, all, read := testBatches(5, 1<<20)
	body := newObjectBody(refs, read)
	if _, err := body.Seek(int64(len(all)), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(body); err == nil {
		t.Fatal("footer read before the batches")
	}
}

func TestReadCacheStaysWithinItsBound(t *testing.T) {
	c := newReadCache(1000)
	var st counters
	for i := 0; i < 20; i++ {
		v, err := c.get(cacheKey{"k", i}, func() (any, int64, error) { return make([]byte, 300), 300, nil }, &st)
		if err != nil || len(v.([]byte)) != 300 {
			t.Fatal(err)
		}
		if c.bytes() > 1000 {
			t.Fatalf("cache holds %d bytes, bound 1000", c.bytes())
		}
	}
	if !c.has(cacheKey{"k", 19}) || c.has(cacheKey{"k", 0}) {
		t.Fatal("the least recently used entry should have gone, the newest stayed")
	}
	loads := 0
	for i := 0; i < 3; i++ {
		_, _ = c.get(cacheKey{"k", 19}, func() (any, int64, error) { loads++; return nil, 0, nil }, &st)
	}
	if loads != 0 || st.cacheHits.Load() != 3 {
		t.Fatalf("cached entry loaded %d times, %d hits", loads, st.cacheHits.Load())
	}
	c.forget("k")
	if c.bytes() != 0 {
		t.Fatalf("forget left %d bytes", c.bytes())
	}
}

// TestReadCacheDropsBehind: a demoted chunk (one a sequential read has passed) goes before
// the chunks read ahead, however recently it was read.
func TestReadCacheDropsBehind(t *testing.T) {
	c := newReadCache(900)
	var st counters
	load := func() (any, int64, error) { return make([]byte, 300), 300, nil }
	for i := 0; i < 3; i++ {
		_, _ = c.get(cacheKey{"k", i}, load, &st)
	}
	c.demote(cacheKey{"k", 2}) // the newest, but passed
	_, _ = c.get(cacheKey{"k", 3}, load, &st)
	if c.has(cacheKey{"k", 2}) || !c.has(cacheKey{"k", 0}) || !c.has(cacheKey{"k", 1}) {
		t.Fatal("the demoted chunk should have gone first")
	}
}

// Uploads are paced a chunk at a time: chunks go no faster than the rate, and time left idle is
// not made up in a burst.
func TestPacerSpreadsChunks(t *testing.T) {
	p := &pacer{rate: 100 << 20} // 100 MiB/s: a 1 MiB chunk each 10 ms
	ctx := context.Background()
	began := time.Now()
	for range 6 {
		if err := p.wait(ctx, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took < 50*time.Millisecond {
		t.Fatalf("6 chunks of 1 MiB at 100 MiB/s in %v, want at least 50 ms", took)
	}
	time.Sleep(100 * time.Millisecond) // idle: 10 chunks' worth
	began = time.Now()
	for range 3 {
		if err := p.wait(ctx, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took < 20*time.Millisecond {
		t.Fatalf("3 chunks after an idle 100 ms in %v: the idle time was made up in a burst", took)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	p.next = time.Now().Add(time.Hour)
	if err := p.wait(cctx, 1); err == nil {
		t.Fatal("a wait under a cancelled context returned no error")
	}
	if err := (&pacer{}).wait(cctx, 1<<30); err != nil {
		t.Fatalf("unpaced: %v", err)
	}
}
