// Package tier is the remote tier of the log: topics with remote.storage.enable (and diskless
// topics, whose commit log it lets shrink: package diskless's checkpoints) have their older
// batches copied to objects in an S3-compatible bucket, which then hold them past the node's
// disk (Kafka's tiered storage, KIP-405, on one node).
//
// The path that runs: one goroutine (Start) loops every Config.PassInterval:
//
//   - At its first pass, and then every Config.CleanInterval, it lists the bucket and deletes
//     what no record names: objects of an upload a crash cut short, of a deleted topic, or of
//     a record retention deleted before its object (clean.go).
//   - It uploads (upload.go), several partitions at once while it is behind: per partition,
//     the batches from the end of the last recorded object up to the last stable offset go
//     into a new object once they reach Config.ObjectBytes (or segment.bytes, if smaller) or
//     have waited Config.UploadInterval (or segment.ms). The object is streamed from the
//     segment files with a conditional PUT, and then recorded in the catalog
//     (meta.RemoteObject), synced. Only then does UploadedEnd move, the offset below which the
//     local retention (package upkeep) may drop batches.
//   - It applies total retention (retention.go): objects wholly below the log start, older
//     than retention.ms or beyond retention.bytes counted over both tiers go, the log start
//     first, then the record, then the object.
//
// Config.Writer (package lease) says whether this node may write the prefix: while it may not,
// a pass does nothing (no upload, record, deletion or clean), every call that changes the
// bucket starts only while it may and is given a deadline inside its lease, and new keys carry
// its epoch (object.go).
//
// A failed call to the bucket stops the pass; the next waits a backoff that doubles up to
// Config.RetryMax. Produce and local reads never wait for the bucket (produce is refused only
// once the node's lease lapses, which is the server's gate, not the tier's); the data stays local
// until it is uploaded, under the full-disk guard of the log.
//
// Reads (read.go): a Fetch below a partition's local log start is planned here (PlanRead):
// the object that holds the offset, its footer (cached), and a chunk of its batches (one
// ranged GET, cached, the next chunk read ahead for a consumer that goes on). ListOffsets by
// timestamp asks FindTimestamp.
//
// Files: tier.go (Tier, Config, the loop), object.go (the object format and keys), upload.go,
// read.go (remote reads and their cache), retention.go, clean.go, restore.go (a node rebuilt
// from the bucket).
//
// Lock order: Tier.mu (the partition table) before partState.mu (a partition's objects);
// readCache.mu is a leaf. No lock is held across a call to the bucket.
package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/objstore"
)

// Config is the tier's configuration; zero fields take the defaults.
type Config struct {
	Bucket objstore.Bucket
	// ObjectBytes is the batch data an object is cut at (default 64 MiB); a topic's
	// segment.bytes, if smaller, cuts it sooner.
	ObjectBytes int64
	// UploadInterval is how long batches wait before they are uploaded in a smaller object
	// (default 60 s); a topic's segment.ms, if shorter, sends them sooner.
	UploadInterval time.Duration
	// UploadBytesPerSec paces uploads, evenly, a chunk at a time (a tier catching up after an
	// outage reads the disk and the network at most this fast); 0: unpaced.
	UploadBytesPerSec int64
	// PassInterval is how often the loop runs (default 1 s).
	PassInterval time.Duration
	// RetentionInterval is how often total retention runs (default 30 s; negative: never).
	RetentionInterval time.Duration
	// CleanInterval is how often the bucket is listed for orphans after the first pass
	// (default 10 min).
	CleanInterval time.Duration
	// ReadCacheBytes bounds the cache of remote reads (footers and chunks; default 64 MiB).
	ReadCacheBytes int64
	// ChunkBytes is the size of one ranged read (default 2 MiB): a fetch reads the chunk its
	// offset falls in, and the next is read ahead.
	ChunkBytes int
	// CallTimeout bounds one call to the bucket (default 30 s; 10 s for a read).
	CallTimeout time.Duration
	// RetryMax bounds the backoff after a failed pass (default 30 s; it starts at 1 s).
	RetryMax time.Duration
	// Writer is the holder of the prefix's lease (package lease's *Lease); nil: this node
	// writes the prefix unconditionally, under epoch 0 (keys without an epoch).
	Writer Writer
	// Gate is the diskless commit log's (objstore.PutGate): while the tier is not behind, an
	// upload waits before each chunk it reads until no commit PUT is in flight, at most
	// gateWait (upload.go). Nil: it never waits.
	Gate   *objstore.PutGate
	Logger *slog.Logger
}

// Writer is who may write the bucket prefix (package lease's *Lease implements it).
type Writer interface {
	// Epoch is the writer's epoch, put in every key it writes.
	Epoch() uint64
	// Remaining is how long the node may still write the prefix; 0: it may not.
	Remaining() time.Duration
}

// errNotWriter: the node does not hold the prefix's lease now.
var errNotWriter = errors.New("tier: this node does not hold the bucket prefix's lease now; nothing is written")

func (t *Tier) epoch() uint64 {
	if t.cfg.Writer == nil {
		return 0
	}
	return t.cfg.Writer.Epoch()
}

// writable reports whether the node may change the prefix now.
func (t *Tier) writable() bool {
	return t.cfg.Writer == nil || t.cfg.Writer.Remaining() > 0
}

// writeCtx is callCtx for a call that changes the bucket: it fails while the node may not
// write, and ends within the lease, so that no write this node starts lands after another
// node may have taken the prefix (within the lease's margin).
func (t *Tier) writeCtx(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if t.cfg.Writer == nil {
		cctx, cancel := t.callCtx(ctx)
		return cctx, cancel, nil
	}
	rem := t.cfg.Writer.Remaining()
	if rem <= 0 {
		return nil, nil, errNotWriter
	}
	cctx, cancel := context.WithTimeout(ctx, min(rem, t.cfg.CallTimeout))
	return cctx, cancel, nil
}

func (c *Config) fill() {
	if c.ObjectBytes <= 0 {
		c.ObjectBytes = 64 << 20
	}
	c.ObjectBytes = min(c.ObjectBytes, maxObjectBytes)
	if c.UploadInterval <= 0 {
		c.UploadInterval = time.Minute
	}
	if c.PassInterval <= 0 {
		c.PassInterval = time.Second
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = 30 * time.Second
	}
	if c.CleanInterval <= 0 {
		c.CleanInterval = 10 * time.Minute
	}
	if c.ReadCacheBytes <= 0 {
		c.ReadCacheBytes = 64 << 20
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = 2 << 20
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Tier is the remote tier of one log.
type Tier struct {
	log    *batchlog.Log
	meta   *meta.Store
	bucket objstore.Bucket
	cfg    Config
	cache  *readCache

	pace    *pacer      // the uploads' reads (upload.go)
	passMu  sync.Mutex  // held by a pass (pass)
	behind  bool        // a partition had two objects' worth due in the last pass (upload.go); under passMu
	giveWay atomic.Bool // the pass's uploads wait on Config.Gate: the tier is not behind (upload.go)

	mu        sync.Mutex
	parts     map[uint32]*partState  // by node-wide partition id
	described map[string]description // the description written last this run, by topic name

	stats   counters
	stop    chan struct{}
	done    chan struct{}
	started atomic.Bool
}

// partState is what the tier knows of one partition.
type partState struct {
	mu      sync.RWMutex
	objects []meta.RemoteObject // recorded, by base offset, each starting at or after the last's End
	end     int64               // the End of the last object recorded, also once retention deleted it

	// Owned by a pass (under passMu): by the one worker uploading the partition.
	pendingSince time.Time // when the loop first saw batches not yet uploaded
	lagBytes     int64
}

// counters are the tier's metrics (Stats).
type counters struct {
	uploadedBytes, uploadedObjects, errors atomic.Int64
	deletedObjects, orphansDeleted         atomic.Int64
	readBytes, readCalls, readErrors       atomic.Int64
	cacheHits, cacheMisses                 atomic.Int64
	lagBytes, lagMs                        atomic.Int64
	lastPassOK                             atomic.Bool
	lastErr                                atomic.Pointer[string]
}

// Open loads the manifest of recorded objects. The log must be open; nothing is read from the
// bucket until Start.
func Open(l *batchlog.Log, m *meta.Store, cfg Config) (*Tier, error) {
	if cfg.Bucket == nil {
		return nil, errors.New("tier: no bucket")
	}
	cfg.fill()
	t := &Tier{log: l, meta: m, bucket: cfg.Bucket, cfg: cfg, parts: map[uint32]*partState{}, described: map[string]description{},
		cache: newReadCache(cfg.ReadCacheBytes), stop: make(chan struct{}), done: make(chan struct{}),
		pace: &pacer{rate: float64(cfg.UploadBytesPerSec)}}
	t.stats.lastPassOK.Store(true) // until a pass fails
	err := m.RemoteObjects(func(o meta.RemoteObject) error {
		ps := t.partLocked(o.Partition)
		if n := len(ps.objects); n > 0 && o.Base < ps.objects[n-1].End {
			return fmt.Errorf("tier: remote object records overlap: partition id %d, %d..%d after %d..%d",
				o.Partition, o.Base, o.End, ps.objects[n-1].Base, ps.objects[n-1].End)
		}
		// A gap (retention passed batches never uploaded) is read past, as the offsets
		// compaction removed are.
		ps.objects = append(ps.objects, o)
		ps.end = o.End
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// partLocked is the state of partition id, made on first use.
func (t *Tier) partLocked(id uint32) *partState {
	ps := t.parts[id]
	if ps == nil {
		ps = &partState{}
		t.parts[id] = ps
	}
	return ps
}

func (t *Tier) part(id uint32) *partState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.partLocked(id)
}

// peek is the state of partition id, or nil when the tier knows nothing of it.
func (t *Tier) peek(id uint32) *partState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.parts[id]
}

// UploadedEnd is the offset below which p's batches are all in recorded objects (0: none
// is): the local retention of a tiered topic drops nothing at or past it.
func (t *Tier) UploadedEnd(p *batchlog.Partition) int64 {
	ps := t.peek(p.ID)
	if ps == nil {
		return 0
	}
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.end
}

// objectsOf is a copy of p's recorded objects.
func (t *Tier) objectsOf(id uint32) []meta.RemoteObject {
	ps := t.peek(id)
	if ps == nil {
		return nil
	}
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return append([]meta.RemoteObject(nil), ps.objects...)
}

// find is p's recorded object that holds offset, or the first one after it; ok is false when
// none does.
func (t *Tier) find(id uint32, offset int64) (meta.RemoteObject, bool) {
	ps := t.peek(id)
	if ps == nil {
		return meta.RemoteObject{}, false
	}
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	i := sort.Search(len(ps.objects), func(i int) bool { return ps.objects[i].End > offset })
	if i == len(ps.objects) {
		return meta.RemoteObject{}, false
	}
	return ps.objects[i], true
}

// Start runs the loop until Close.
func (t *Tier) Start() {
	if t.started.Swap(true) {
		return
	}
	go t.loop()
}

// Close stops the loop and waits for it: an upload under way is abandoned (its object, if
// written, is an orphan the next start deletes).
func (t *Tier) Close() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	if t.started.Load() {
		<-t.done
	}
}

func (t *Tier) loop() {
	defer close(t.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var cleaned, retained time.Time
	backoff := time.Duration(0)
	for {
		wait := t.cfg.PassInterval
		if backoff > 0 {
			wait = backoff
		}
		select {
		case <-t.stop:
			return
		case <-time.After(wait):
		}
		now := time.Now()
		err := t.pass(ctx, now, &cleaned, &retained)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			msg := err.Error()
			t.stats.lastErr.Store(&msg)
			t.stats.lastPassOK.Store(false)
			backoff = min(max(2*backoff, time.Second), t.cfg.RetryMax)
			t.cfg.Logger.Warn("tier: pass failed; retrying", "in", backoff, "err", err)
			continue
		}
		t.stats.lastPassOK.Store(true)
		backoff = 0
	}
}

// pass is one run of the loop: clean when due (until a clean succeeds, at every pass), upload,
// retain when due. A part that fails does not stop the others: with the bucket down, each
// fails, and the lag still counts what waits.
func (t *Tier) pass(ctx context.Context, now time.Time, cleaned, retained *time.Time) error {
	// One pass at a time: RunOnce may be called while the loop runs, and a pass's state (each
	// partition's lag, whether the tier is behind) and its order (no clean beside an upload)
	// are one pass's.
	t.passMu.Lock()
	defer t.passMu.Unlock()
	if !t.writable() {
		return errNotWriter
	}
	var errs []error
	if cleaned.IsZero() || now.Sub(*cleaned) >= t.cfg.CleanInterval {
		if err := t.clean(ctx); err != nil {
			errs = append(errs, err)
		} else {
			*cleaned = now
		}
	}
	if err := t.uploadAll(ctx, now); err != nil {
		errs = append(errs, err)
	}
	if t.cfg.RetentionInterval > 0 && (retained.IsZero() || now.Sub(*retained) >= t.cfg.RetentionInterval) {
		if err := t.retain(ctx, now); err != nil {
			errs = append(errs, err)
		} else {
			*retained = now
		}
	}
	if len(errs) > 0 {
		t.stats.errors.Add(1)
	}
	return errors.Join(errs...)
}

// RunOnce runs one pass now (tests, and a restore that waits for its first clean): clean,
// upload and retain, as the loop would.
func (t *Tier) RunOnce(ctx context.Context, now time.Time) error {
	var zero1, zero2 time.Time
	return t.pass(ctx, now, &zero1, &zero2)
}

// Stats is what the metrics and /readyz tell of the tier.
type Stats struct {
	UploadedBytes, UploadedObjects int64
	// Errors counts passes that failed in part (an upload, a deletion, the listing).
	Errors                           int64
	DeletedObjects, OrphansDeleted   int64
	ReadBytes, ReadCalls, ReadErrors int64
	CacheHits, CacheMisses           int64
	// LagBytes is the batch data of tiered topics not yet uploaded, below the last stable
	// offset; LagSeconds how long the oldest of it has waited (both as of the last pass).
	LagBytes   int64
	LagSeconds float64
	// Healthy is false while the last pass failed; LastError is its error.
	Healthy   bool
	LastError string
	// RemoteBytes and RemoteObjects are what the manifest records.
	RemoteBytes, RemoteObjects int64
	// GateWaits counts the chunks of uploads that waited for a diskless commit PUT in flight
	// (Config.Gate), GateWaited how long they waited in all.
	GateWaits  int64
	GateWaited time.Duration
}

// Stats reads the counters.
func (t *Tier) Stats() Stats {
	s := Stats{
		UploadedBytes: t.stats.uploadedBytes.Load(), UploadedObjects: t.stats.uploadedObjects.Load(),
		Errors: t.stats.errors.Load(), DeletedObjects: t.stats.deletedObjects.Load(),
		OrphansDeleted: t.stats.orphansDeleted.Load(), ReadBytes: t.stats.readBytes.Load(),
		ReadCalls: t.stats.readCalls.Load(), ReadErrors: t.stats.readErrors.Load(),
		CacheHits: t.stats.cacheHits.Load(), CacheMisses: t.stats.cacheMisses.Load(),
		LagBytes: t.stats.lagBytes.Load(), LagSeconds: float64(t.stats.lagMs.Load()) / 1000,
		Healthy: t.stats.lastPassOK.Load(),
	}
	s.GateWaits, s.GateWaited = t.cfg.Gate.Waited()
	if e := t.stats.lastErr.Load(); e != nil && !s.Healthy {
		s.LastError = *e
	}
	t.mu.Lock()
	for _, ps := range t.parts {
		ps.mu.RLock()
		for _, o := range ps.objects {
			s.RemoteBytes += o.Size
			s.RemoteObjects++
		}
		ps.mu.RUnlock()
	}
	t.mu.Unlock()
	return s
}

// tiered is every partition of every topic with remote.storage.enable or diskless.enable, with
// its topic. A diskless partition is uploaded as a tiered one: its high watermark moves only
// once its batches are in a commit object (package diskless), so the tier holds a prefix of
// what the commit log holds, and the commit objects it covers can go (diskless checkpoints).
func (t *Tier) tiered() []tieredPartition {
	var out []tieredPartition
	for _, tp := range t.log.Topics() {
		if !tp.Settings.RemoteStorage && !tp.Settings.Diskless {
			continue
		}
		for _, p := range tp.Partitions {
			out = append(out, tieredPartition{topic: tp, p: p})
		}
	}
	return out
}

type tieredPartition struct {
	topic *batchlog.Topic
	p     *batchlog.Partition
}

func (t *Tier) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.cfg.CallTimeout)
}
