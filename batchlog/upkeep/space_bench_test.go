package upkeep

import (
	"sort"
	"testing"
	"time"

	"inlet/batchlog"
)

// BenchmarkMixedRetentionSpace measures the disk bytes the segment files hold against the
// bytes retention keeps, under the mixed workload of an ingest node: a firehose (8 partitions,
// 16 KiB batches, paced at 48 MiB/s) with retention.ms of 3 s, next to a low-volume topic with
// Kafka's default 7-day retention taking a 200-byte record every half second, written first.
// A retention pass runs every 500 ms. "copy-forward" is Inlet as it runs; "no-copy" deletes
// only segments no live batch is in, as Inlet did before reclaim.go. Each runs 20 s (b.N is
// ignored: run with -benchtime 1x); the ratios are over the samples of the last 10 s.
//
//	go test -run '^$' -bench BenchmarkMixedRetentionSpace -benchtime 1x ./batchlog/
func BenchmarkMixedRetentionSpace(b *testing.B) {
	for _, v := range []struct {
		name       string
		noRelocate bool
	}{{"copy-forward", false}, {"no-copy", true}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				runMixedRetention(b, v.noRelocate)
			}
		})
	}
}

func runMixedRetention(b *testing.B, noRelocate bool) {
	const (
		run        = 20 * time.Second
		rate       = 48 << 20 // firehose bytes per second
		batchBytes = 16 << 10
		perRequest = 8
	)
	l, err := batchlog.Open(batchlog.Options{Dir: b.TempDir(), SegmentBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	u := start(l, Config{RetentionCheckInterval: -1}, hooks{noRelocate: noRelocate})
	slow, _ := l.CreateTopic("slow", 1, nil)
	fire, _ := l.CreateTopic("fire", 8, map[string]string{"retention.ms": "3000"})

	stop := make(chan struct{})
	done := make(chan struct{})
	var written int64
	go func() { // the firehose, paced
		defer close(done)
		inflight := make(chan struct{}, 4)
		began := time.Now()
		for i := 0; ; i++ {
			select {
			case <-stop:
				for range cap(inflight) {
					inflight <- struct{}{}
				}
				return
			case inflight <- struct{}{}:
			}
			if ahead := time.Duration(float64(written)/rate*float64(time.Second)) - time.Since(began); ahead > 0 {
				time.Sleep(ahead)
			}
			now := time.Now().UnixMilli()
			appends := make([]batchlog.Append, perRequest)
			for j := range appends {
				appends[j] = stampedBatch(fire.Partitions[(i*perRequest+j)%len(fire.Partitions)], 16, now, batchBytes, 'f')
			}
			written += perRequest * batchBytes
			l.Submit(&batchlog.Request{Appends: appends, Done: func(*batchlog.Request) { <-inflight }})
		}
	}()

	var ratios []float64
	var disk, retained int64
	began := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for time.Since(began) < run {
		<-tick.C
		submitWait(b, l, stampedBatch(slow.Partitions[0], 1, time.Now().UnixMilli(), 200, 's'))
		if err := u.EnforceRetention(time.Now()); err != nil {
			b.Fatal(err)
		}
		disk, retained = l.Stats().SegmentBytes, 0
		for _, t := range l.Topics() {
			for _, p := range t.Partitions {
				n, err := l.PartitionBytes(p)
				if err != nil {
					b.Fatal(err)
				}
				retained += n
			}
		}
		if time.Since(began) > run/2 {
			ratios = append(ratios, float64(disk)/float64(retained))
		}
	}
	close(stop)
	<-done
	sort.Float64s(ratios)
	b.ReportMetric(float64(written)/(1<<20), "written-MiB")
	b.ReportMetric(float64(disk)/(1<<20), "disk-MiB")
	b.ReportMetric(float64(retained)/(1<<20), "retained-MiB")
	b.ReportMetric(ratios[len(ratios)/2], "disk/retained")
	b.ReportMetric(ratios[len(ratios)-1], "max-disk/retained")
	b.ReportMetric(float64(l.Stats().RelocatedBytes)/(1<<20), "copied-MiB")
}
