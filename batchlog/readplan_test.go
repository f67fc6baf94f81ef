package batchlog

import (
	"bytes"
	"testing"
)

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
