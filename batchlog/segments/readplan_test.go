package segments

import (
	"bytes"
	"testing"
)

// The tail cache keeps the newest buffers within its limit, and serves a read only when one
// buffer holds all of it.
func TestTailCacheLookupAndEviction(t *testing.T) {
	c := &tailCache{limit: 3 * 4096}
	buf := func(tag byte) []byte { return bytes.Repeat([]byte{tag}, 4096) }
	var evicted [][]byte
	evicted = c.add(1, 0, buf(1), evicted[:0])
	evicted = c.add(1, 4096, buf(2), evicted[:0])
	evicted = c.add(2, 0, buf(3), evicted[:0])
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
	evicted = c.add(2, 4096, buf(4), evicted[:0])
	if len(evicted) != 1 || evicted[0][0] != 1 {
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
