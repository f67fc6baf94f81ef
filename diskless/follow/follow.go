// Package follow keeps a standby's copy of the diskless commit log. While a node stands by
// beside the writer of its bucket prefix (inlet --standby), a Follower reads each commit
// object the writer lands into a directory (<data-dir>/follow), so that the takeover's Recover
// reads from the bucket only the objects that landed since the follower's last look: it reads
// the others through Cache (diskless.Config.Cache).
//
// One look, every Interval (200 ms):
//
//	list the checkpoints, then the commit objects
//	drop the copies of the objects the newest checkpoint covers (numbers up to its own: a
//	    restore starts from it and reads none of them) and of those no longer listed (deleted
//	    by the writer after a checkpoint)
//	GET each listed object past the newest checkpoint with no copy of its listed size, in
//	    number order, up to Readers at once, into a temporary file renamed to its number
//
// The follower never writes to the bucket, and reads each object once (a GET that fails is
// tried again at the next look). A key's bytes never change while it is listed: commit
// objects are created only where no object is (If-None-Match), deleted only once a checkpoint
// covers them, and their numbers are never used again. The copies are a cache, written without
// fsync: a copy that a crash left short or zeroed is told by its size or its CRC, and Recover
// trusts none it has not checked (diskless.ObjectCache).
//
// Lag: the objects past the newest checkpoint with no copy as of the last look, their bytes, and
// how long the oldest of them has waited since a look first listed it; all 0 when caught up.
//
// Memory: one buffer per reader, as large as the largest object read rounded up to 4 MiB
// (Readers x (--diskless-commit-bytes + 4 MiB) at most: 144 MiB at the defaults), kept while
// following so that its pages stay the process's. The copies are written with O_DIRECT from it
// (writeCopy), not through the page cache. Disk: the objects past the newest
// checkpoint, as the bucket holds them (about --diskless-checkpoint-interval-ms of the writer's
// diskless produce; without checkpoints, the whole commit log).
package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"inlet/diskless"
	"inlet/objstore"
	"inlet/segfs"
)

// DefaultInterval is the time between looks: at the default commit interval (100 ms) a look
// finds about two new objects, and a takeover reads about that many from the bucket. The cost
// to the bucket is two LISTs per look (10/s), beside the writer's PUTs.
const DefaultInterval = 200 * time.Millisecond

// DefaultReaders is how many GETs a look runs at once: a GET of a full object (32 MiB) takes
// about as long as a PUT of one, and the writer keeps up to four PUTs in flight
// (diskless.DefaultMaxPutsInFlight).
const DefaultReaders = 4

// Config configures a Follower.
type Config struct {
	Bucket   objstore.Bucket
	Dir      string        // the copy's directory, made if missing
	Interval time.Duration // 0: DefaultInterval
	Readers  int           // 0: DefaultReaders
	Logger   *slog.Logger
}

// Stats say what a Follower did, and how far behind the bucket it is as of its last look.
type Stats struct {
	LagObjects int64         // objects past the newest checkpoint with no copy
	LagBytes   int64         // their bytes
	Behind     time.Duration // how long the oldest of them has waited since it was listed
	Objects    int64         // copies held
	Bytes      int64         // their bytes
	Fetched    int64         // objects read from the bucket
	FetchedBytes,
	Looks int64
}

// Follower copies the commit objects into Config.Dir until Stop.
type Follower struct {
	cfg    Config
	cache  Cache
	cancel context.CancelFunc
	done   chan struct{}
	bufs   chan []byte // the readers' buffers, reused

	mu     sync.Mutex
	held   map[uint64]int64     // the copies: number -> size
	bufCap int                  // the largest reader's buffer made (bufferCap)
	seen   map[uint64]time.Time // the objects missing a copy: when a look first listed them
	stats  Stats                // Behind unset: computed from seen
}

// Start makes the directory, takes the copies it holds (removing the temporary files a
// stopped follower left) and starts following.
func Start(cfg Config) (*Follower, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Readers <= 0 {
		cfg.Readers = DefaultReaders
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	f := &Follower{cfg: cfg, cache: Cache{Dir: cfg.Dir}, done: make(chan struct{}), bufs: make(chan []byte, cfg.Readers),
		held: map[uint64]int64{}, seen: map[uint64]time.Time{}}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			_ = os.Remove(filepath.Join(cfg.Dir, e.Name()))
			continue
		}
		n, ok := diskless.ParseNumbered("", e.Name())
		if info, err := e.Info(); ok && err == nil && info.Mode().IsRegular() {
			f.held[n] = info.Size()
			f.stats.Objects++
			f.stats.Bytes += info.Size()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.run(ctx)
	return f, nil
}

// Stop stops following, waits for the GETs in flight to end, lets go of the readers' buffers
// (the node that takes over keeps the Follower for its stats) and zeroes the lag: a node that
// no longer stands by is not behind. The copies stay for Recover.
func (f *Follower) Stop() {
	f.cancel()
	<-f.done
	for len(f.bufs) > 0 {
		<-f.bufs
	}
	f.mu.Lock()
	f.stats.LagObjects, f.stats.LagBytes = 0, 0
	clear(f.seen)
	f.mu.Unlock()
}

// Stats reads the counters.
func (f *Follower) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	for _, t := range f.seen {
		s.Behind = max(s.Behind, time.Since(t))
	}
	return s
}

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	failing := false
	for {
		err := f.look(ctx)
		if ctx.Err() != nil {
			return
		}
		// Logged when a look first fails and when one succeeds again, not at every look.
		if err != nil && !failing {
			f.cfg.Logger.Warn("standby: following the bucket failed; trying again at each look", "err", err)
		} else if err == nil && failing {
			f.cfg.Logger.Info("standby: following the bucket again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.cfg.Interval):
		}
	}
}

type object struct {
	n    uint64
	size int64
}

// look is one look (see the package comment).
func (f *Follower) look(ctx context.Context) error {
	ck := uint64(0)
	err := f.cfg.Bucket.List(ctx, diskless.CheckpointPrefix, func(key string, _ int64) error {
		if n, ok := diskless.ParseNumbered(diskless.CheckpointPrefix, key); ok {
			ck = max(ck, n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the checkpoints: %w", err)
	}
	listed := map[uint64]int64{}
	var objs []object
	err = f.cfg.Bucket.List(ctx, diskless.LogPrefix, func(key string, size int64) error {
		if n, ok := diskless.ParseNumbered(diskless.LogPrefix, key); ok {
			listed[n] = size
			objs = append(objs, object{n, size})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the commit objects: %w", err)
	}
	f.mu.Lock()
	f.stats.Looks++
	for n, size := range f.held {
		if s, ok := listed[n]; n <= ck || !ok || s != size {
			f.drop(n)
		}
	}
	var missing []object
	var lagBytes int64
	now := time.Now()
	was := f.seen
	f.seen = make(map[uint64]time.Time, len(was))
	for _, o := range objs { // the keys list in number order
		if _, ok := f.held[o.n]; !ok && o.n > ck {
			missing = append(missing, o)
			lagBytes += o.size
			f.seen[o.n] = now
			if t, ok := was[o.n]; ok {
				f.seen[o.n] = t
			}
		}
	}
	f.stats.LagObjects, f.stats.LagBytes = int64(len(missing)), lagBytes
	f.mu.Unlock()

	var wg sync.WaitGroup
	errs := make(chan error, len(missing))
	sem := make(chan struct{}, f.cfg.Readers)
	for _, o := range missing {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f.fetch(ctx, o); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// fetch GETs object o into a reader's buffer and writes its copy from there (writeCopy),
// through a temporary file.
func (f *Follower) fetch(ctx context.Context, o object) error {
	var buf []byte
	select {
	case buf = <-f.bufs:
	default:
	}
	if int64(cap(buf)) < blocks(o.size) {
		buf = segfs.AlignedBuffer(f.bufferCap(o.size))
	}
	defer func() { f.bufs <- buf }()
	key := diskless.LogKey(o.n)
	if err := f.cfg.Bucket.ReadAt(ctx, key, 0, buf[:o.size]); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil // deleted since the listing: covered by a checkpoint
		}
		return fmt.Errorf("reading %s: %w", key, err)
	}
	path := f.cache.path(o.n)
	err := writeCopy(path+tmpSuffix, buf, o.size)
	if err == nil {
		err = os.Rename(path+tmpSuffix, path)
	}
	if err != nil {
		_ = os.Remove(path + tmpSuffix)
		return fmt.Errorf("copying %s: %w", key, err)
	}
	f.mu.Lock()
	f.held[o.n] = o.size
	delete(f.seen, o.n)
	f.stats.LagObjects--
	f.stats.LagBytes -= o.size
	f.stats.Objects++
	f.stats.Bytes += o.size
	f.stats.Fetched++
	f.stats.FetchedBytes += o.size
	f.mu.Unlock()
	return nil
}

// bufferCap is the capacity of a new buffer for an object of size bytes: the largest made so far
// if that holds it, else size rounded up to bufferStep, which becomes the largest. A reader's
// buffer too small for an object is replaced, and every new one is made as large as any before,
// so that a reader makes a new buffer only when an object is larger than every one before it:
// a new buffer is memory the kernel hands over fresh, each page faulted and zeroed as the GET
// fills it, which for buffers made to each object's size cost the standby more than the GETs.
func (f *Follower) bufferCap(size int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bufCap = max(f.bufCap, int((size+bufferStep-1)/bufferStep*bufferStep))
	return f.bufCap
}

// bufferStep: buffers grow in steps of 4 MiB.
const bufferStep = 4 << 20

// blocks is n rounded up to whole blocks of segfs.BlockSize.
func blocks(n int64) int64 { return (n + segfs.BlockSize - 1) &^ (segfs.BlockSize - 1) }

// writeCopy writes buf[:size] into a new file name with O_DIRECT, from buf (block-aligned, with
// room for size rounded up to a block: the tail is zeroed, written, and cut off by truncating
// the file to size). Written through the page cache, the copy cost the standby most of its CPU:
// every page of the cache it fills is memory the kernel takes fresh (28-93% of a following
// standby's CPU went to that copy in the runs of profiles/standby-direct-20261207/), while the
// copy is read only at a takeover. Where the file system refuses O_DIRECT (tmpfs), it is
// written through the page cache.
func writeCopy(name string, buf []byte, size int64) error {
	fl, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_DIRECT, 0o644)
	if errors.Is(err, unix.EINVAL) {
		return os.WriteFile(name, buf[:size], 0o644)
	}
	if err != nil {
		return err
	}
	padded := blocks(size)
	clear(buf[size:padded])
	_, err = fl.Write(buf[:padded])
	if err == nil && padded != size {
		err = fl.Truncate(size)
	}
	if cerr := fl.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, unix.EINVAL) { // a file system that takes the flag but not the write
		return os.WriteFile(name, buf[:size], 0o644)
	}
	return err
}

// drop removes copy n; f.mu held.
func (f *Follower) drop(n uint64) {
	if err := os.Remove(f.cache.path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.cfg.Logger.Warn("standby: removing a copy of a commit object", "err", err)
		return
	}
	f.stats.Objects--
	f.stats.Bytes -= f.held[n]
	delete(f.held, n)
}

const tmpSuffix = ".tmp"

// Cache is the copy in Dir as Recover reads it (diskless.ObjectCache): commit object n in the
// file named by n's 20 digits, as in its key.
type Cache struct{ Dir string }

func (c Cache) path(n uint64) string { return filepath.Join(c.Dir, fmt.Sprintf("%020d", n)) }

// ReadAt fills dst from off in the copy of object n, if the copy has size bytes.
func (c Cache) ReadAt(n uint64, size, off int64, dst []byte) bool {
	fl, err := os.Open(c.path(n))
	if err != nil {
		return false
	}
	defer fl.Close()
	info, err := fl.Stat()
	if err != nil || info.Size() != size {
		return false
	}
	_, err = fl.ReadAt(dst, off)
	return err == nil
}

// Drop removes the directory and every copy in it.
func (c Cache) Drop() { _ = os.RemoveAll(c.Dir) }
