package batchlog

import (
	"sync"
	"testing"
	"time"
)

// recordingObserver keeps what Options.Observer was told.
type recordingObserver struct {
	mu                     sync.Mutex
	groups, records, bytes int
	syncs                  int
	negative               bool
}

func (o *recordingObserver) GroupDurable(records, bytes int, d time.Duration) {
	o.mu.Lock()
	o.groups++
	o.records += records
	o.bytes += bytes
	o.negative = o.negative || d < 0
	o.mu.Unlock()
}

func (o *recordingObserver) Synced(d time.Duration) {
	o.mu.Lock()
	o.syncs++
	o.negative = o.negative || d < 0
	o.mu.Unlock()
}

// TestObserverCountsAppendedRecordsOnly: the observer hears of every durable group with the
// records and bytes it appended (a duplicate appends nothing), and of the segment syncs on
// both segment write paths; Stats sees the segment files and Pebble.
func TestObserverCountsAppendedRecordsOnly(t *testing.T) {
	for _, layout := range []string{LayoutSegments, segmentsBuffered, LayoutPebble} {
		t.Run(layout, func(t *testing.T) {
			obs := &recordingObserver{}
			l := openLayoutOpts(t, t.TempDir(), layout, Options{Observer: obs})
			defer l.Close()
			tp, err := l.CreateTopic("t", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := tp.Partitions[0]
			first := idempotent(p, 7, 0, 0, 3, 'a')
			submitWait(t, l, first, plain(p, 2, 'b'))
			dup := idempotent(p, 7, 0, 0, 3, 'a')
			if r := submitWait(t, l, dup); r.Appends[0].BaseOffset != 0 {
				t.Fatalf("duplicate answered at %d, want 0", r.Appends[0].BaseOffset)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if obs.groups != 2 || obs.records != 5 || obs.bytes != len(first.Batch)+len(fakeBatch(2, 'b')) {
				t.Errorf("observer: %d groups, %d records, %d bytes; want 2 groups, 5 records, %d bytes", obs.groups, obs.records, obs.bytes, len(first.Batch)+len(fakeBatch(2, 'b')))
			}
			if obs.negative {
				t.Error("a negative duration was reported")
			}
			st := l.Stats()
			if st.Pebble == nil {
				t.Error("Stats has no Pebble metrics")
			}
			if layout == LayoutPebble {
				if obs.syncs != 0 || st.SegmentFiles != 0 {
					t.Errorf("pebble layout: %d segment syncs, %d segment files", obs.syncs, st.SegmentFiles)
				}
				return
			}
			// The duplicate's group writes nothing, so only the first needs a sync.
			if obs.syncs < 1 {
				t.Error("no segment sync was reported")
			}
			if st.SegmentFiles < 1 || st.SegmentBytes < int64(obs.bytes) {
				t.Errorf("Stats: %d segment files of %d bytes, want at least 1 holding %d bytes", st.SegmentFiles, st.SegmentBytes, obs.bytes)
			}
		})
	}
}
