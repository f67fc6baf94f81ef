package batchlog

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"inlet/segfs"
	"inlet/wire"
)

// BenchmarkRecovery measures start-up (Open, then Close) after a crash-like close of the
// default segments layout (O_DIRECT where the temporary directory takes it, the default
// CheckpointInterval and segment size), for logs of 64 MiB, 256 MiB and 1 GiB of record data
// (1 GiB not with -short). The question: does recovery grow with the log? Replay starts at
// Pebble's checkpoint, so it should not, much; what still grows is opening every segment file
// and, mostly, Pebble replaying its own WAL at Open and flushing what it replayed: the index
// entries since its last memtable flush (so bounded by MemTableSize, not by the log).
//
// Each size's log is written once, outside the timed loop: four partitions, 16 KiB batches of
// 16 records, two of every three from idempotent producers (two per partition), the rest plain.
// Its tail is fixed so sizes compare: the main part, a pause longer than the checkpoint
// interval, one batch alone (its group carries a checkpoint), then recoveryTail bytes at once
// (replayed unless writing them took longer than a checkpoint interval; replayed-MiB says how
// much was after the checkpoint). The close writes no final checkpoint (noFinalCheckpoint).
//
// A restart's replay moves the checkpoint, so each iteration opens a fresh clone of the crashed
// directory (Pebble's files copied, segment files hard-linked: nothing modifies them when no
// tail is torn, which the clone's sizes confirm), made outside the timer, with the page cache
// of every file dropped (POSIX_FADV_DONTNEED) so the replay reads from the device, as after a
// power loss.
//
// Metrics: ns/op is Open plus Close; ms/open is Open alone; log-MiB the record data written;
// replayed-MiB the segment bytes after the checkpoint (padding included); segments the segment
// files Open opens; wal-MiB the size of Pebble's WAL files that Open replays. make bench-recovery runs it.
func BenchmarkRecovery(b *testing.B) {
	for _, size := range []int64{64 << 20, 256 << 20, 1 << 30} {
		b.Run(strconv.FormatInt(size>>20, 10)+"MiB", func(b *testing.B) {
			if size > 256<<20 && testing.Short() {
				b.Skip("1 GiB log only without -short")
			}
			benchRecovery(b, size)
		})
	}
}

const (
	recoveryBatchBytes = 16 << 10
	recoveryRecords    = 16
	recoveryTail       = 8 << 20
	recoveryInflight   = 64
)

func benchRecovery(b *testing.B, size int64) {
	tmp := b.TempDir()
	master := filepath.Join(tmp, "crashed")
	ckSeg, ckPos, direct := writeCrashedLog(b, master, size)
	segDir := filepath.Join(master, "segments")
	sizes := segmentSizes(b, segDir)
	replayed := replayedBytes(sizes, ckSeg, ckPos)
	wal := pebbleWALBytes(b, master)
	b.Logf("%d MiB of record data in %d segment files (direct I/O: %v), %.1f MiB after the checkpoint, %.1f MiB of Pebble WAL",
		size>>20, len(sizes), direct, float64(replayed)/(1<<20), float64(wal)/(1<<20))

	work := filepath.Join(tmp, "run")
	discard := slog.New(slog.DiscardHandler)
	var opening time.Duration
	for b.Loop() {
		b.StopTimer()
		if err := os.RemoveAll(work); err != nil {
			b.Fatal(err)
		}
		cloneCrashedLog(b, master, work)
		b.StartTimer()

		began := time.Now()
		l, err := Open(Options{Dir: work, Logger: discard})
		opening += time.Since(began)
		if err != nil {
			b.Fatal(err)
		}
		l.withoutFinalCheckpoint()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for name, n := range segmentSizes(b, segDir) {
		if sizes[name] != n {
			b.Fatalf("segment %s of the crashed log changed size from %d to %d under a clone's recovery", name, sizes[name], n)
		}
	}
	b.ReportMetric(float64(opening.Microseconds())/1e3/float64(b.N), "ms/open")
	b.ReportMetric(float64(size>>20), "log-MiB")
	b.ReportMetric(float64(replayed)/(1<<20), "replayed-MiB")
	b.ReportMetric(float64(len(sizes)), "segments")
	b.ReportMetric(float64(wal)/(1<<20), "wal-MiB")
}

// pebbleWALBytes is the size of the WAL files in Pebble's directory dir.
func pebbleWALBytes(b *testing.B, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			b.Fatal(err)
		}
		n += info.Size()
	}
	return n
}

// writeCrashedLog writes size bytes of record data (plus the fixed tail) to a segments log in
// dir and closes it without a final checkpoint. It returns the checkpoint left in Pebble and
// whether segments were written with O_DIRECT.
func writeCrashedLog(b *testing.B, dir string, size int64) (ckSeg uint32, ckPos int64, direct bool) {
	l, err := Open(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	l.withoutFinalCheckpoint()
	topic, err := l.CreateTopic("recovery", 4, nil)
	if err != nil {
		b.Fatal(err)
	}
	type producer struct {
		id  int64
		seq int32
	}
	producers := make([][]producer, len(topic.Partitions))
	for i := range producers {
		for range 2 {
			id, err := l.Meta().AllocateProducerID()
			if err != nil {
				b.Fatal(err)
			}
			producers[i] = append(producers[i], producer{id: id})
		}
	}
	payload := make([]byte, recoveryBatchBytes-61)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}

	var failed atomic.Int32
	free := make(chan *Request, recoveryInflight)
	for range recoveryInflight {
		r := &Request{Appends: make([]Append, 1)}
		r.Appends[0].Batch = make([]byte, recoveryBatchBytes)
		copy(r.Appends[0].Batch[61:], payload)
		r.Done = func(r *Request) {
			if r.Appends[0].Err != wire.ErrNone {
				failed.Add(1)
			}
			free <- r
		}
		free <- r
	}
	n := 0
	submit := func() {
		r := <-free
		a := &r.Appends[0]
		batch := a.Batch
		*a = Append{Partition: topic.Partitions[n%len(topic.Partitions)], Batch: batch, ProducerID: -1,
			ProducerEpoch: -1, BaseSequence: -1, NumRecords: recoveryRecords}
		if n%3 != 2 {
			pr := &producers[n%len(topic.Partitions)][n/len(topic.Partitions)%2]
			a.ProducerID, a.ProducerEpoch, a.BaseSequence = pr.id, 0, pr.seq
			pr.seq += recoveryRecords
		}
		now := time.Now().UnixMilli()
		binary.BigEndian.PutUint64(batch[27:], uint64(now))
		binary.BigEndian.PutUint64(batch[35:], uint64(now))
		binary.BigEndian.PutUint64(batch[43:], uint64(a.ProducerID))
		binary.BigEndian.PutUint16(batch[51:], uint16(a.ProducerEpoch))
		binary.BigEndian.PutUint32(batch[53:], uint32(a.BaseSequence))
		sealBatch(batch, recoveryRecords)
		l.Submit(r)
		n++
	}
	drain := func() { // holding every request at once means none is in flight
		held := make([]*Request, 0, recoveryInflight)
		for range recoveryInflight {
			held = append(held, <-free)
		}
		for _, r := range held {
			free <- r
		}
	}

	for written := int64(0); written < size; written += recoveryBatchBytes {
		submit()
	}
	drain()
	// The tail: a checkpoint just before it (the first group after a pause carries one), then
	// recoveryTail bytes written as fast as they go.
	time.Sleep(defaultCheckpointInterval + 10*time.Millisecond)
	submit()
	drain()
	for written := 0; written < recoveryTail; written += recoveryBatchBytes {
		submit()
	}
	drain()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d appends failed", f)
	}
	// Nothing is in flight: the checkpoint in Pebble is the one the restart will find (Close
	// writes no final one).
	ckSeg, ckPos, err = l.segs.Checkpoint()
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	// The store writes with O_DIRECT wherever the file system opens a segment so.
	for name := range segmentSizes(b, filepath.Join(dir, "segments")) {
		if f, err := segfs.OS.OpenDirect(filepath.Join(dir, "segments", name)); err == nil {
			f.Close()
			direct = true
		}
		break
	}
	return ckSeg, ckPos, direct
}

// segmentSizes maps each segment file's name to its size.
func segmentSizes(b *testing.B, segDir string) map[string]int64 {
	entries, err := os.ReadDir(segDir)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			b.Fatal(err)
		}
		out[e.Name()] = info.Size()
	}
	return out
}

// replayedBytes is how many segment bytes lie after the checkpoint (ckSeg, ckPos).
func replayedBytes(sizes map[string]int64, ckSeg uint32, ckPos int64) int64 {
	var n int64
	for name, size := range sizes {
		id, err := strconv.ParseUint(strings.TrimSuffix(name, ".seg"), 10, 32)
		if err != nil {
			continue
		}
		switch {
		case uint32(id) == ckSeg:
			n += size - ckPos
		case uint32(id) > ckSeg:
			n += size
		}
	}
	return n
}

// cloneCrashedLog makes dst a copy of the crashed log in src that a recovery may change without
// changing src: Pebble's files are copied, segment files hard-linked (recovery only reads and
// syncs them unless it cuts a torn tail). Every file's page cache is then dropped.
func cloneCrashedLog(b *testing.B, src, dst string) {
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if strings.HasSuffix(path, ".seg") {
			if err := os.Link(path, to); err != nil {
				return err
			}
			return dropPageCache(to, false)
		}
		if err := copyFile(path, to); err != nil {
			return err
		}
		return dropPageCache(to, true)
	})
	if err != nil {
		b.Fatal(err)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// dropPageCache evicts a file's pages from the page cache; dirty pages (a fresh copy) are
// written back first, since only clean pages can be dropped.
func dropPageCache(path string, sync bool) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if sync {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	return nil
}
