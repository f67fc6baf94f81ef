package batchlog_test

import (
	"encoding/binary"
	"testing"
	"time"

	. "inlet/batchlog"
)

// stampedBatch is a plain batch of records whose timestamps are ts (unix ms), padded to size
// bytes, tagged with tag.
func stampedBatch(p *Partition, records int32, ts int64, size int, tag byte) Append {
	b := make([]byte, max(size, 62))
	b[61] = tag
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	return Append{Partition: p, Batch: sealBatch(b, records), ProducerID: -1, NumRecords: records}
}

// TestMixedRetentionReclaimsPerPartition: a topic with 7-day retention holding one record,
// written first, must not pin the segments of a firehose whose retention expires: after the
// retention pass the segment files hold about what the firehose's retention keeps, the old
// record is still there at its offset (across a clean restart and a crash-like one), and
// reads of it racing the pass never fail.
func TestMixedRetentionReclaimsPerPartition(t *testing.T) {
	for _, layout := range []string{LayoutSegments, segmentsBuffered} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			const segBytes = 64 << 10
			opts := Options{CheckpointInterval: -1}
			l := openLayoutOpts(t, dir, layout, opts).WithoutFinalCheckpoint()
			l.SetSegmentBytes(segBytes) // openLayoutOpts sets 4 KiB
			u := passes(l)
			slow, _ := l.CreateTopic("slow", 1, nil) // Kafka's default: 7 days
			fire, _ := l.CreateTopic("fire", 2, map[string]string{"retention.ms": "60000"})
			now := time.Now()
			old, recent := now.Add(-time.Hour).UnixMilli(), now.UnixMilli()
			submitWait(t, l, stampedBatch(slow.Partitions[0], 1, recent, 200, 's'))
			// 4 MiB that retention expires, then 256 KiB that it keeps.
			for i := 0; i < 4<<20/(16<<10); i++ {
				submitWait(t, l, stampedBatch(fire.Partitions[i%2], 10, old, 16<<10, 'o'))
			}
			for i := 0; i < 256<<10/(16<<10); i++ {
				submitWait(t, l, stampedBatch(fire.Partitions[i%2], 10, recent, 16<<10, 'r'))
			}
			before := l.Stats().SegmentBytes

			// Readers of the old record race the pass that copies it forward.
			sp := slow.Partitions[0]
			stop := make(chan struct{})
			errs := make(chan error, 2)
			for range 2 {
				go func() {
					for {
						select {
						case <-stop:
							errs <- nil
							return
						default:
						}
						got, err := l.ReadBatches(sp, 0, 1, 1<<20, true, nil)
						if err != nil || len(got) != 200 || got[61] != 's' {
							errs <- err
							if err == nil {
								t.Errorf("read %d bytes of the old record", len(got))
							}
							return
						}
					}
				}()
			}
			if err := u.EnforceRetention(now); err != nil {
				t.Fatal(err)
			}
			close(stop)
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatalf("a read racing the reclaim: %v", err)
				}
			}
			after := l.Stats().SegmentBytes
			kept := int64(256<<10 + 200)
			t.Logf("segment bytes %d before the pass, %d after; retention keeps %d", before, after, kept)
			if after > kept+3*segBytes {
				t.Fatalf("%d segment bytes after the pass, retention keeps %d: the old record pins the firehose's segments", after, kept)
			}
			check := func(l *Log, when string) {
				sp := mustTopic(t, l, "slow").Partitions[0]
				got, err := l.ReadBatches(sp, 0, sp.HighWatermark(), 1<<20, true, nil)
				if err != nil || len(got) != 200 || got[61] != 's' || binary.BigEndian.Uint64(got) != 0 {
					t.Fatalf("%s: the old record: %d bytes, err %v", when, len(got), err)
				}
			}
			check(l, "after the pass")
			// A second pass with nothing left to reclaim copies nothing again.
			copied := l.Stats().RelocatedBytes
			if err := u.EnforceRetention(now); err != nil {
				t.Fatal(err)
			}
			if again := l.Stats().RelocatedBytes; again != copied {
				t.Fatalf("a second pass copied %d more bytes", again-copied)
			}
			check(l, "after a second pass")
			l.Close() // leaves the replay to the next start (noFinalCheckpoint)
			l = openLayoutOpts(t, dir, layout, opts).WithoutFinalCheckpoint()
			u = passes(l)
			check(l, "after a restart")
			// The copies keep no segment alive either: another firehose hour goes too.
			fire = mustTopic(t, l, "fire")
			l.SetSegmentBytes(segBytes)
			for i := 0; i < 2<<20/(16<<10); i++ {
				submitWait(t, l, stampedBatch(fire.Partitions[i%2], 10, old, 16<<10, 'o'))
			}
			if err := u.EnforceRetention(now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if after := l.Stats().SegmentBytes; after > 4*segBytes {
				t.Fatalf("%d segment bytes after everything but the old record expired", after)
			}
			check(l, "after the second reclaim")
			l.Close()
			l = openLayoutOpts(t, dir, layout, opts)
			defer l.Close()
			check(l, "after the second restart")
		})
	}
}
