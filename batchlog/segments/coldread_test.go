package segments

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"golang.org/x/sys/unix"

	"inlet/segfs"
)

// sizedBatch is a record batch of one record at base, n bytes long, its tail filled from rng.
func sizedBatch(base int64, n int, rng *rand.Rand) []byte {
	b := make([]byte, n)
	for i := 61; i < n; i++ {
		b[i] = byte(rng.Uint32())
	}
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(n-12))
	b[16] = 2
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))
	binary.BigEndian.PutUint32(b[57:], 1)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// directCounter is the OS file system whose direct readers count their reads and check that
// each is aligned as O_DIRECT requires.
type directCounter struct {
	segfs.FS
	t     *testing.T
	reads atomic.Int64
}

func (d *directCounter) OpenReadDirect(name string) (segfs.File, error) {
	f, err := segfs.OS.(directReadFS).OpenReadDirect(name)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, d: d}, nil
}

type countedFile struct {
	segfs.File
	d *directCounter
}

func (f *countedFile) ReadAt(p []byte, off int64) (int, error) {
	f.d.reads.Add(1)
	if off%blockSize != 0 || len(p)%blockSize != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%blockSize != 0 {
		f.d.t.Errorf("unaligned direct read of %d bytes at %d", len(p), off)
	}
	return f.File.ReadAt(p, off)
}

// Cold reads are byte for byte the batches written, read the way before (one buffered pread
// per batch): across segment boundaries, from inside a coalesced run, at the tail cache's
// edge, and with batches larger than a direct read. Batches of a partition written close
// together are read with fewer reads than batches, each one aligned.
func TestColdReadsAreCoalescedAndMatchTheFiles(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fs := &directCounter{FS: segfs.OS, t: t}
	cfg := Config{SegmentBytes: 256 << 10, CheckpointInterval: -1, CacheBytes: 2 << 20}
	s, err := Open(fs, dir, db, true, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// Partition 7 in runs of batches (one group each), partition 8 between them; a few of
	// 7's batches are larger than a direct read.
	var want [][]byte // partition 7's batches by offset
	var next8 int64
	for g := 0; len(want) < 400; g++ {
		grp := s.NewGroup(0)
		for range 1 + rng.IntN(12) {
			n := 61 + rng.IntN(3000)
			if rng.IntN(60) == 0 {
				n = readChunk + rng.IntN(readChunk)
			}
			b := sizedBatch(int64(len(want)), n, rng)
			grp.SetData(7, int64(len(want)), b, false)
			want = append(want, b)
		}
		if g%3 == 0 {
			grp.SetData(8, next8, sizedBatch(next8, 61+rng.IntN(70<<10), rng), false)
			next8++
		}
		if err := grp.Apply(); err != nil {
			t.Fatal(err)
		}
		if err := grp.Wait(); err != nil {
			t.Fatal(err)
		}
		grp.Release()
	}
	if len(s.segs) < 3 {
		t.Fatalf("%d segments, want reads across several", len(s.segs))
	}
	for _, seg := range s.segs {
		if seg.rd == nil {
			t.Skip("the file system refuses direct reads")
		}
	}
	expect := func(offset int64, maxBytes int) []byte {
		var out []byte
		for _, b := range want[offset:] {
			if len(out) > 0 && len(out)+len(b) > maxBytes {
				break
			}
			out = append(out, b...)
			if len(out) >= maxBytes {
				break
			}
		}
		return out
	}
	read := func(s *Store, offset int64, maxBytes int) []byte {
		var plan ReadPlan
		defer plan.Release()
		if err := s.PlanRead(7, offset, int64(len(want)), maxBytes, true, &plan); err != nil {
			t.Fatal(err)
		}
		got, err := plan.AppendTo([]byte("head"))
		if err != nil {
			t.Fatalf("read at %d: %v", offset, err)
		}
		if !bytes.HasPrefix(got, []byte("head")) {
			t.Fatal("the read changed what dst held")
		}
		return got[4:]
	}
	type fetch struct {
		offset int64
		max    int
	}
	var fetches []fetch
	for off := int64(0); off < int64(len(want)); off += 1 + int64(rng.IntN(7)) {
		fetches = append(fetches, fetch{off, 1 + rng.IntN(600<<10)})
	}
	fetches = append(fetches, fetch{0, 64 << 20}) // everything: every segment boundary

	fs.reads.Store(0)
	direct := make([][]byte, len(fetches))
	for i, f := range fetches {
		direct[i] = read(s, f.offset, f.max)
		if w := expect(f.offset, f.max); !bytes.Equal(direct[i], w) {
			t.Fatalf("fetch %d at %d up to %d: %d bytes, want the %d written", i, f.offset, f.max, len(direct[i]), len(w))
		}
	}
	st := s.Stats()
	if st.CacheHits == 0 || st.CacheMisses == 0 {
		t.Fatalf("cache hits %d, misses %d: want reads on both sides of its edge", st.CacheHits, st.CacheMisses)
	}
	t.Logf("%d batches from the cache, %d not, in %d direct reads", st.CacheHits, st.CacheMisses, fs.reads.Load())
	if r := fs.reads.Load(); r == 0 || r >= st.CacheMisses {
		t.Fatalf("%d direct reads for %d batches the cache missed, want fewer (coalesced)", r, st.CacheMisses)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The same files read through the page cache, one pread per batch, without the cache.
	cfg.Buffered, cfg.CacheBytes = true, -1
	b, err := Open(segfs.OS, dir, db, false, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fetches {
		if got := read(b, f.offset, f.max); !bytes.Equal(got, direct[i]) {
			t.Fatalf("fetch %d at %d: the direct read differs from the buffered one", i, f.offset)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// A file shorter than its index says: the read fails, and dst is as it came.
	cfg.Buffered = false
	s, err = Open(fs, dir, db, false, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var plan ReadPlan
	defer plan.Release()
	if err := s.PlanRead(7, 0, int64(len(want)), 64<<20, true, &plan); err != nil {
		t.Fatal(err)
	}
	last := plan.spans[len(plan.spans)-1]
	if err := os.Truncate(last.seg.f.Name(), last.pos+int64(last.n)-1); err != nil {
		t.Fatal(err)
	}
	if got, err := plan.AppendTo([]byte("head")); err == nil || string(got) != "head" {
		t.Fatalf("read of a short file: %d bytes, err %v; want an error and dst as it came", len(got), err)
	}
}

// BenchmarkColdRead reads 64 MiB of one partition's batches (runs of 16 KiB–300 KiB batches
// between another partition's, as one producer per partition writes them) from segment files
// the page cache does not hold (dropped with FADV_DONTNEED before each pass), in fetches of up
// to 10 MiB: direct (this store's cold reads) against buffered (one pread per batch through
// the page cache). cpu-ns/MiB is the process's user and system CPU per MiB read.
func BenchmarkColdRead(b *testing.B) {
	dir := b.TempDir()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	cfg := Config{CheckpointInterval: -1, CacheBytes: -1}
	s, err := Open(segfs.OS, dir, db, true, cfg)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var n7, n8 int64
	total := 0
	for total < 64<<20 {
		grp := s.NewGroup(0)
		for range 4 {
			n := 16<<10 + rng.IntN(284<<10)
			grp.SetData(7, n7, sizedBatch(n7, n, rng), false)
			n7++
			total += n
			grp.SetData(8, n8, sizedBatch(n8, 16<<10+rng.IntN(284<<10), rng), false)
			n8++
		}
		if err := grp.Apply(); err != nil {
			b.Fatal(err)
		}
		if err := grp.Wait(); err != nil {
			b.Fatal(err)
		}
		grp.Release()
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name     string
		buffered bool
	}{{"direct", false}, {"buffered", true}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg.Buffered = mode.buffered
			s, err := Open(segfs.OS, dir, db, false, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			dst := make([]byte, 0, 11<<20)
			var cpu time.Duration
			b.SetBytes(int64(total))
			for b.Loop() {
				b.StopTimer()
				for _, seg := range s.segs {
					if err := unix.Fadvise(int(seg.f.(interface{ Fd() uintptr }).Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
						b.Fatal(err)
					}
				}
				before := cpuTime()
				b.StartTimer()
				for off := int64(0); off < n7; {
					var plan ReadPlan
					if err := s.PlanRead(7, off, n7, 10<<20, true, &plan); err != nil {
						b.Fatal(err)
					}
					got, err := plan.AppendTo(dst[:0])
					if err != nil {
						b.Fatal(err)
					}
					off = int64(binary.BigEndian.Uint64(got[len(got)-plan.spans[len(plan.spans)-1].n:])) + 1
					plan.Release()
				}
				cpu += cpuTime() - before
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(total>>20), "cpu-ns/MiB")
		})
	}
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A cold read of a plan, its runs read beside the reader by the store's helpers, allocates
// nothing once the plan and dst have their room (TestProducePathAllocatesNothing's rule for
// the read side), and reads the same bytes each time.
func TestColdReadAllocatesNothing(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := Open(segfs.OS, t.TempDir(), db, true, Config{CheckpointInterval: -1, CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 24 {
		grp := s.NewGroup(0)
		grp.SetData(7, int64(i), sizedBatch(int64(i), 20<<10, rng), false)
		grp.SetData(8, int64(i), sizedBatch(int64(i), 200<<10, rng), false) // apart: a run each
		if err := grp.Apply(); err != nil {
			t.Fatal(err)
		}
		if err := grp.Wait(); err != nil {
			t.Fatal(err)
		}
		grp.Release()
	}
	var plan ReadPlan
	defer plan.Release()
	if err := s.PlanRead(7, 0, 24, 1<<30, true, &plan); err != nil {
		t.Fatal(err)
	}
	if plan.spans[0].seg.rd == nil {
		t.Skip("the file system refuses direct reads")
	}
	dst := make([]byte, 0, plan.Bytes)
	first, err := plan.AppendTo(dst)
	if err != nil {
		t.Fatal(err)
	}
	first = bytes.Clone(first)
	allocs := testing.AllocsPerRun(20, func() {
		got, err := plan.AppendTo(dst[:0])
		if err != nil || !bytes.Equal(got, first) {
			t.Fatalf("read %d bytes, err %v; want the first read's %d", len(got), err, len(first))
		}
	})
	if allocs != 0 && !raceEnabled { // the race detector's sync.Pool drops buffers at random
		t.Fatalf("%v allocations a read", allocs)
	}
}

// Plans read at the same time (some with the helpers, some without them) read the same bytes
// as each read alone.
func TestColdReadsAtOnceMatchReadsAlone(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := Open(segfs.OS, t.TempDir(), db, true, Config{SegmentBytes: 1 << 20, CheckpointInterval: -1, CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 40 {
		grp := s.NewGroup(0)
		for p := range uint32(4) {
			grp.SetData(p, int64(i), sizedBatch(int64(i), 1<<10+rng.IntN(90<<10), rng), false)
		}
		if err := grp.Apply(); err != nil {
			t.Fatal(err)
		}
		if err := grp.Wait(); err != nil {
			t.Fatal(err)
		}
		grp.Release()
	}
	read := func(p uint32) ([]byte, error) {
		var plan ReadPlan
		defer plan.Release()
		if err := s.PlanRead(p, 0, 40, 1<<30, true, &plan); err != nil {
			return nil, err
		}
		return plan.AppendTo(nil)
	}
	alone := make([][]byte, 4)
	for p := range alone {
		if alone[p], err = read(uint32(p)); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 4)
	for p := range uint32(4) {
		go func() {
			for range 20 {
				got, err := read(p)
				if err == nil && !bytes.Equal(got, alone[p]) {
					err = fmt.Errorf("partition %d: %d bytes differ from the %d read alone", p, len(got), len(alone[p]))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
