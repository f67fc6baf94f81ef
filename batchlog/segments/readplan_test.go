package segments

import (
	"bytes"
	"testing"
)

// The tail cache keeps the newest buffers within its limit, and serves a read only when one
// buffer holds all of it.
func TestTailCacheLookupAndEviction(t *testing.T) {
	c := &tailCache{limit: 3 * 4096}
	buf := func(tag byte) *stageBuf { return &stageBuf{b: bytes.Repeat([]byte{tag}, 4096)} }
	add := func(seg uint32, start int64, box *stageBuf, evicted []*stageBuf) []*stageBuf {
		return c.add(seg, start, box.b, box, evicted)
	}
	var evicted []*stageBuf
	evicted = add(1, 0, buf(1), evicted[:0])
	evicted = add(1, 4096, buf(2), evicted[:0])
	evicted = add(2, 0, buf(3), evicted[:0])
	if len(evicted) != 0 {
		t.Fatalf("evicted %d buffers under the limit", len(evicted))
	}
	dst := make([]byte, 100)
	for _, tc := range []struct {
		seg  uint32
		pos  int64
		n    int
		want byte // 0: a miss
	}{
		{1, 0, 100, 1},
		{1, 4096 - 100, 100, 1},
		{1, 4096 - 50, 100, 0}, // straddles two buffers
		{1, 4096, 100, 2},
		{1, 8192, 100, 0}, // past segment 1's last buffer
		{2, 10, 100, 3},
		{3, 0, 100, 0},
		{0, 0, 100, 0},
	} {
		clear(dst)
		got := c.copyOut(dst[:tc.n], tc.seg, tc.pos)
		if got != (tc.want != 0) || (got && !bytes.Equal(dst[:tc.n], bytes.Repeat([]byte{tc.want}, tc.n))) {
			t.Fatalf("segment %d at %d: hit %v, data %v, want %d", tc.seg, tc.pos, got, dst[:4], tc.want)
		}
	}
	evicted = add(2, 4096, buf(4), evicted[:0])
	if len(evicted) != 1 || evicted[0].b[0] != 1 {
		t.Fatalf("evicted %d buffers, want the oldest", len(evicted))
	}
	if c.copyOut(dst, 1, 0) || !c.copyOut(dst, 1, 4096) || !c.copyOut(dst, 2, 4096) {
		t.Fatal("after eviction: the oldest is still served, or a newer one is not")
	}
	c.reset()
	if c.copyOut(dst, 2, 4096) {
		t.Fatal("served after reset")
	}
}

// TestStagingBuffersArePooledBySize: a small group never takes a large pooled buffer (the
// tail cache counts a buffer whole, so that would hold fewer groups): each gets the power of
// two at or above its size.
func TestStagingBuffersArePooledBySize(t *testing.T) {
	s := &Store{}
	large := s.getStage(9 << 20)
	if cap(large.b) != 16<<20 {
		t.Fatalf("a staging buffer for 9 MiB holds %d bytes, want 16 MiB", cap(large.b))
	}
	s.putStage(large)
	small := s.getStage(100 << 10)
	if cap(small.b) != 128<<10 {
		t.Fatalf("a staging buffer for 100 KiB holds %d bytes, want 128 KiB", cap(small.b))
	}
	s.putStage(small)
	// (sync.Pool may drop what it was given, as the race detector makes it do at random, so
	// only the size is checked, not that small itself comes back.)
	if again := s.getStage(65 << 10); cap(again.b) != 128<<10 {
		t.Fatalf("a staging buffer for 65 KiB holds %d bytes, want 128 KiB", cap(again.b))
	}
}
