package batchlog

import (
	"bufio"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"inlet/wire"
)

// processWriteBytes reads write_bytes from /proc/self/io: bytes this process caused to be sent
// to the storage layer (WAL, blob files, sstables, compactions), counted when pages are dirtied.
func processWriteBytes(tb testing.TB) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		tb.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Skip("write_bytes not in /proc/self/io")
	return 0
}

// BenchmarkWriteAmplification appends 16 KiB batches round-robin over 16 partitions with 64
// requests in flight (so group commits form as under load) and reports bytes written to disk
// per byte acknowledged, including Pebble's flushes and compactions during the run. Run it
// with -benchtime 60s for the figure in BENCHMARKS.md (make bench-writeamp).
func BenchmarkWriteAmplification(b *testing.B) {
	for _, layout := range []string{LayoutSegments, LayoutPebble} {
		b.Run(layout, func(b *testing.B) { benchWriteAmplification(b, layout) })
	}
}

func benchWriteAmplification(b *testing.B, layout string) {
	dir := b.TempDir()
	l, err := Open(Options{Dir: dir, Layout: layout})
	if err != nil {
		b.Fatal(err)
	}
	topic, err := l.CreateTopic("amp", 16, nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]byte, 16<<10)
	binary.BigEndian.PutUint64(batch[43:], ^uint64(0))
	batch = sealBatch(batch, 150)
	const inflight = 64
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	free := make(chan *Request, inflight)
	for range inflight {
		r := &Request{Appends: make([]Append, 1)}
		r.Appends[0].Batch = append([]byte(nil), batch...)
		r.Done = func(r *Request) {
			if r.Appends[0].Err != wire.ErrNone {
				b.Errorf("append failed: %d", r.Appends[0].Err)
			}
			free <- r
			<-sem
			wg.Done()
		}
		free <- r
	}
	before := processWriteBytes(b)
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		r := <-free
		r.Appends[0] = Append{Partition: topic.Partitions[i%16], Batch: r.Appends[0].Batch, ProducerID: -1, NumRecords: 150}
		wg.Add(1)
		l.Submit(r)
	}
	wg.Wait()
	b.StopTimer()
	written := processWriteBytes(b) - before
	acked := int64(b.N) * int64(len(batch))
	b.ReportMetric(float64(written)/float64(acked), "disk-bytes/acked-byte")
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}
