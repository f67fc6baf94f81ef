package batchlog

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

// Reads of recent data come from the cache, and are byte for byte what the segment files
// hold: the same log reopened without a cache reads the same bytes from disk.
func TestFetchCacheReadsMatchTheFiles(t *testing.T) {
	dir := t.TempDir()
	// A cache smaller than what is written, so some reads go to the files.
	l := openLayoutOpts(t, dir, LayoutSegments, Options{FetchCacheBytes: 64 << 10})
	topic, _ := l.CreateTopic("t", 2, nil)
	for i := range 400 {
		submitWait(t, l, idempotent(topic.Partitions[i%2], 9, 0, int32(i/2*3), 3, byte(i)))
	}
	read := func(l *Log) [][]byte {
		topic, _ := l.Topic("t")
		var out [][]byte
		for _, p := range topic.Partitions {
			for off := int64(0); off < p.HighWatermark(); off += 30 {
				got, err := l.ReadBatches(p, off, p.HighWatermark(), 10*62, true, nil)
				if err != nil || len(got) != 10*62 {
					t.Fatalf("partition %d at %d: %d bytes, err %v", p.Index, off, len(got), err)
				}
				out = append(out, got)
			}
		}
		return out
	}
	cached := read(l)
	st := l.Stats()
	hits, misses := st.FetchCacheHits, st.FetchCacheMisses
	if hits == 0 || misses == 0 {
		t.Fatalf("cache hits %d, misses %d: want both", hits, misses)
	}
	l.Close()
	l = openLayoutOpts(t, dir, LayoutSegments, Options{FetchCacheBytes: -1})
	defer l.Close()
	fromDisk := read(l)
	if st := l.Stats(); st.FetchCacheHits != 0 || st.FetchCacheMisses != 0 {
		t.Fatalf("no cache, yet %d hits and %d misses", st.FetchCacheHits, st.FetchCacheMisses)
	}
	for i := range cached {
		if !bytes.Equal(cached[i], fromDisk[i]) {
			t.Fatalf("read %d differs between the cache and the files", i)
		}
	}
}

// A read from inside a batch returns that batch whole, and a plan's End covers what it read.
func TestPlanReadFromInsideABatch(t *testing.T) {
	for _, layout := range []string{LayoutSegments, LayoutPebble} {
		t.Run(layout, func(t *testing.T) {
			l := openLayout(t, t.TempDir(), layout)
			defer l.Close()
			topic, _ := l.CreateTopic("t", 1, nil)
			p := topic.Partitions[0]
			for i := range 4 {
				submitWait(t, l, idempotent(p, 9, 0, int32(i*3), 3, byte(i)))
			}
			var plan ReadPlan
			if err := l.PlanRead(p, 4, 12, 2*62, true, &plan); err != nil {
				t.Fatal(err)
			}
			if plan.Bytes != 2*62 || plan.End < 6 || plan.End > 6+1 {
				t.Fatalf("planned %d bytes, end %d: want 2 batches from offset 3, end 6 or 7", plan.Bytes, plan.End)
			}
			got, err := l.AppendPlanned([]byte("x"), &plan)
			if err != nil || len(got) != 1+2*62 || got[1+61] != 1 {
				t.Fatalf("read %d bytes (%v), err %v", len(got), got[:2], err)
			}
		})
	}
}

// The recent index answers for the newest batches, in order, and gives up (so the reader
// goes to Pebble) below its oldest entry, after a relocation and after forget.
func TestRecentIndex(t *testing.T) {
	var r recentIndex
	loc := func(i int) batchLoc { return batchLoc{seg: 1, pos: int64(i) * 100, length: 100} }
	for i := range recentEntries + 8 {
		r.add(7, int64(i*3), loc(i), false)
	}
	collect := func(offset, limit int64) (bases []int64, ok bool) {
		ok, _ = r.each(7, offset, limit, func(base int64, l batchLoc) (bool, error) {
			if l.pos != base/3*100 {
				t.Fatalf("base %d at %d", base, l.pos)
			}
			bases = append(bases, base)
			return true, nil
		})
		return bases, ok
	}
	oldest := int64(8 * 3)
	if _, ok := collect(oldest-1, 1000); ok {
		t.Fatal("answered below its oldest entry")
	}
	got, ok := collect(oldest+4, oldest+10) // inside the batch at oldest+3, up to the one at oldest+9
	if !ok || len(got) != 3 || got[0] != oldest+3 || got[2] != oldest+9 {
		t.Fatalf("bases %v (ok %v)", got, ok)
	}
	r.add(7, oldest+3, loc(0), true) // relocated
	if _, ok := collect(oldest+4, 1000); ok {
		t.Fatal("answered after a relocation")
	}
	r.add(7, 1000, loc(1000/3), false)
	if got, ok := collect(1000, 1001); !ok || len(got) != 1 {
		t.Fatalf("after a restart: %v (ok %v)", got, ok)
	}
	r.forget(7)
	if _, ok := collect(1000, 1001); ok {
		t.Fatal("answered after forget")
	}
	if ok, _ := r.each(8, 0, 10, nil); ok {
		t.Fatal("answered for a partition it never saw")
	}
}
