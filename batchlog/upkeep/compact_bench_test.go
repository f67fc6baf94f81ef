package upkeep

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inlet/batchlog"
)

// BenchmarkProduceBesideCompaction measures what compaction costs a produce load beside it:
// 16 writers append 100-record batches of 100-byte records to a 16-partition topic as fast as
// the log takes them (8 requests in flight each), while a 4-partition compacted topic takes
// 5 MiB/s of keyed records (10,000 keys) and a retention pass (with its compaction) runs every
// 500 ms. "off" is the same load and the same passes with the keyed topic on cleanup.policy
// delete (7 days: nothing expires), so only compaction differs. Each runs 10 s (b.N is
// ignored: run with -benchtime 1x); run both side by side and compare their records/s.
//
//	go test -run '^$' -bench BenchmarkProduceBesideCompaction -benchtime 1x ./batchlog/
func BenchmarkProduceBesideCompaction(b *testing.B) {
	for _, compact := range []bool{false, true} {
		name := "off"
		if compact {
			name = "on"
		}
		b.Run("compaction="+name, func(b *testing.B) {
			for b.Loop() {
				runProduceBesideCompaction(b, compact)
			}
		})
	}
}

func runProduceBesideCompaction(b *testing.B, compact bool) {
	const (
		run          = 10 * time.Second
		writers      = 16
		inflight     = 8
		perBatch     = 100
		recordBytes  = 100
		stateRate    = 5 << 20
		stateKeys    = 10_000
		statePerTurn = 100
	)
	l, err := batchlog.Open(batchlog.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	u := passes(l)
	load, _ := l.CreateTopic("load", writers, nil)
	policy := "delete"
	if compact {
		policy = "compact"
	}
	state, _ := l.CreateTopic("state", 4, map[string]string{"cleanup.policy": policy, "segment.ms": "200", "min.cleanable.dirty.ratio": "0.2"})

	loadBatch := func() []byte {
		bt := make([]byte, 61+perBatch*recordBytes)
		return sealBatch(bt, perBatch)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acked atomic.Int64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots := make(chan struct{}, inflight)
			for {
				select {
				case <-stop:
					for range inflight {
						slots <- struct{}{}
					}
					return
				case slots <- struct{}{}:
				}
				l.Submit(&batchlog.Request{Appends: []batchlog.Append{{Partition: load.Partitions[w], Batch: loadBatch(), ProducerID: -1, NumRecords: perBatch}},
					Done: func(r *batchlog.Request) {
						if r.Appends[0].Err == 0 {
							acked.Add(perBatch)
						}
						<-slots
					}})
			}
		}()
	}
	wg.Add(1)
	go func() { // the compacted topic, paced
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		began := time.Now()
		written := 0
		value := make([]byte, recordBytes)
		seq := make([]int32, len(state.Partitions))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if ahead := time.Duration(float64(written)/stateRate*float64(time.Second)) - time.Since(began); ahead > 0 {
				time.Sleep(ahead)
			}
			var recs []keyed
			for range statePerTurn {
				recs = append(recs, keyed{[]byte(fmt.Sprintf("key-%05d", rng.IntN(stateKeys))), value})
			}
			p := i % len(state.Partitions)
			bt := keyedBatch(int64(100+p), seq[p], time.Now().UnixMilli(), recs)
			seq[p] += statePerTurn
			submitWait(b, l, batchlog.Append{Partition: state.Partitions[p], Batch: bt, ProducerID: int64(100 + p), BaseSequence: seq[p] - statePerTurn, NumRecords: statePerTurn})
			written += len(bt)
		}
	}()
	passes := 0
	began := time.Now()
	startAcked := acked.Load()
	for time.Since(began) < run {
		time.Sleep(500 * time.Millisecond)
		if err := u.EnforceRetention(time.Now()); err != nil {
			b.Fatal(err)
		}
		passes++
	}
	elapsed := time.Since(began)
	records := acked.Load() - startAcked
	close(stop)
	wg.Wait()
	st := l.Stats()
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(st.CompactedRecordsRemoved), "compacted-records-removed")
	b.ReportMetric(float64(st.CompactedBatchesRewritten+st.CompactedBatchesDropped), "compacted-batches")
	b.ReportMetric(float64(passes), "retention-passes")
}
