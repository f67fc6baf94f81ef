// Package diskless is the commit log of diskless topics (KIP-1150's diskless.enable) in the
// bucket: a produce to a diskless partition is answered only once its batches are in a commit
// object there, so that a node lost with its disk loses nothing it acknowledged.
//
// The log (batchlog) still assigns offsets, writes and syncs every batch locally (the local
// segments are the read cache), and then hands each group holding diskless appends to the
// Committer (batchlog.DisklessCommitter) in place of publishing them. The Committer:
//
//	Commit (completer goroutine)   add the group's batches to the open commit object: an
//	                               entry's head in the object's buffer, and the batch itself
//	                               where it lies, in the produce request's frame (held until
//	                               the group is answered), or if it is small, copied into the
//	                               object's chunks
//	run (one goroutine)            at most once per CommitInterval: seal the oldest open
//	                               object, number it (the next number; its header names the
//	                               object sealed before it) and start its PUT (If-None-Match)
//	                               on a goroutine of its own, up to MaxPutsInFlight at once;
//	                               retry a failed PUT with backoff; as objects land, in number
//	                               order, publish their groups' high watermarks and answer
//	                               their requests
//	reap (one goroutine)           answer REQUEST_TIMED_OUT to requests held past
//	                               RequestTimeout (their batches stay queued for the bucket)
//
// In pseudo-code, one turn of run (it alone starts PUTs, numbers objects and publishes):
//
//	for each result of a PUT:     landed; or failed (backoff); or a stale writer's object
//	                              under its number (renumber, below); or another writer's
//	                              (fence: stop, answer everything NOT_LEADER_OR_FOLLOWER)
//	while the oldest object has landed (and the lease is held): publish it, answer it
//	if a renumber is due and no PUT is in flight: renumber
//	if fewer than MaxPutsInFlight PUTs are in flight and CommitInterval has passed since the
//	last PUT started: retry the oldest failed object whose backoff is over, or else, if no
//	object is failing, seal the oldest open one and PUT it
//
// One PUT in flight at a time was the first design: a PUT of an 8-10 MiB object took about
// 170 ms on a loopback versitygw, longer than the interval, so the PUT's latency and not the
// window set the pace (about 60 MB/s). Several in flight keep the window's bound (CommitBytes
// per interval) as the only ceiling.
//
// Invariants:
//   - Nothing of a diskless partition is readable (its high watermark) or acknowledged before
//     the commit object holding it, and every object before that, is in the bucket: groups are
//     published in the order the completer handed them over, and objects in number order
//     whatever order their PUTs land in (object n's groups wait for objects 1..n).
//   - A batch, once given offsets, is never dropped: a failed PUT is retried until it lands
//     (or the writer is fenced), since a retry of an unanswered batch is answered from the
//     producer's window with the offsets already given.
//   - Objects are numbered when sealed, 1, 2, ..., each header naming the object it follows
//     (After: the one sealed before it), each created only if its key is free. A PUT answered
//     ErrExists is read back: the same bytes are this writer's own earlier attempt (a reply
//     lost); an object of an older epoch is a stale writer's late PUT, and its number is void:
//     once no PUT is in flight, that object and every one sealed after it, landed or not
//     (theirs follow the void number), are numbered again past every number used, the first
//     naming the object the void one followed; anything else is another writer's object, and
//     this one is fenced: it stops writing and answers NOT_LEADER_OR_FOLLOWER.
//   - A node that stops with PUTs in flight can leave a gap: object n missing, objects after
//     it landed. None of those was answered (they wait for n). Recover treats an object that
//     follows one not in the log as void, and writes an empty object naming the last object
//     of the log before the node serves, so that they stay void if a late PUT fills the gap.
//   - The PUT rate is at most one PUT (a first try or a retry) started per CommitInterval (10/s
//     at the default) at any load, at most MaxPutsInFlight at once; a Close drains without
//     the interval. While a PUT is failing no new object is sealed: a down bucket sees only
//     the retries, with backoff. The objects waiting behind a slow or failing bucket are
//     bounded by MaxPendingBytes, past which diskless appends are refused KAFKA_STORAGE_ERROR
//     before they take offsets (Admit).
//
// Recover (recover.go) runs before the node serves: it starts from the newest valid checkpoint
// (checkpoint.go), replays the commit objects after it that the local log lacks (all of them
// after a restore on an empty disk, past what the remote tier holds) and uploads the local
// batches that never reached the bucket, then starts the loop. The checkpoint loop
// (checkpoint.go) folds each landed object's state, and once the tier covers a run of objects,
// writes a checkpoint and deletes them.
//
// The frames: an object's batches are sent from the requests' frames (objstore.Buffers, written
// in place), so no group may be answered while a PUT that sends its batches is in flight, for
// an answered request's frame goes back to the transport's pool. Publishing answers an object's
// groups only once it has landed; a fence answers once the loop's PUTs have ended (halt); the
// reaper copies an object's batches into memory of its own (detach) before it answers a group
// of it early, and leaves alone an object whose PUT is in flight or that has landed.
//
// Lock order: Committer.mu is a leaf; no call to the bucket, the log or a request's completion
// is made holding it. An object's number and header are the loop's alone (and Recover's,
// before the loop starts); its buffer and references are written under mu until it is sealed,
// and its putting flag, which the reaper reads, is set under mu.
package diskless

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/objstore"
	"inlet/wire"
)

// Defaults. CommitInterval after Inkless's inkless.produce.commit.interval.ms (250 ms there;
// 100 ms here, the group commit of the seed this design follows). With at most one PUT
// started per interval, CommitBytes x 10/s is the diskless throughput's ceiling: Inkless's
// 8 MiB (inkless.produce.buffer.max.bytes) held a node to about 60 MB/s, in objects of
// 6.4 MiB on average (a group of up to --max-group-bytes is never split), against 320 MB/s
// for local-acked topics on the same node; 32 MiB objects reached about twice that, more than
// 16 MiB did (BENCHMARKS.md, "Diskless topics"). MaxPendingBytes: the objects in flight, the
// one filling, and as many again queued behind a slow bucket (8 x CommitBytes).
// DefaultMaxPutsInFlight: four PUTs in flight cover a bucket whose PUT of a full object takes
// up to four intervals; MaxPutsInFlightLimit bounds the setting, and with it the objects a
// stopped node can leave past a gap (Recover).
const (
	DefaultCommitInterval  = 100 * time.Millisecond
	DefaultCommitBytes     = 32 << 20
	DefaultMaxPutsInFlight = 4
	MaxPutsInFlightLimit   = 16
	DefaultMaxPendingBytes = 8 * DefaultCommitBytes
	DefaultRequestTimeout  = 30 * time.Second // Kafka's request.timeout.ms
)

// Config configures a Committer.
type Config struct {
	Bucket objstore.Bucket
	NodeID int32
	// Epoch is the writer epoch stamped on each object (the prefix's lease); nil: 0.
	// Writable, when set, says whether this node is the prefix's writer now (the lease held):
	// no object is PUT while it is false, and none is published or answered unless it is
	// true once the object has landed. Fenced, when set, closes once another node has taken
	// the prefix for good: the committer then stops as when it meets another's object.
	Epoch    func() uint64
	Writable func() bool
	Fenced   <-chan struct{}
	// CommitInterval: at most one PUT starts per interval. CommitBytes: an object is closed
	// once its batches reach this many bytes (a group is never split, so one may pass it by a
	// group). MaxPutsInFlight: PUTs of commit objects in flight at once (1 to
	// MaxPutsInFlightLimit), as Kafka's producer bounds its requests in flight per connection
	// (max.in.flight.requests.per.connection); they are answered in order all the same.
	// MaxPendingBytes bounds the batches not yet in the bucket. RequestTimeout: a request held
	// this long is answered REQUEST_TIMED_OUT. Zero values take the defaults.
	CommitInterval  time.Duration
	CommitBytes     int
	MaxPutsInFlight int
	MaxPendingBytes int64
	RequestTimeout  time.Duration
	// CloseTimeout bounds how long Close keeps trying to PUT what is queued; 0: 10 s.
	CloseTimeout time.Duration
	Logger       *slog.Logger
	// Observer, when set, is told each group's commit latency (metrics.Diskless).
	Observer Observer
	// Gate, when set, is marked for each commit object's PUT, so that the remote tier's
	// uploads give way to them (objstore.PutGate).
	Gate *objstore.PutGate

	// UploadedEnd, when set, is the remote tier's uploaded end of a partition
	// (tier.Tier.UploadedEnd): the commit objects it covers are folded into a checkpoint and
	// deleted, at most once per CheckpointInterval (0: DefaultCheckpointInterval; negative:
	// never). See checkpoint.go.
	UploadedEnd        func(*batchlog.Partition) int64
	CheckpointInterval time.Duration
	// Cache, when set, is a local copy of commit objects (a standby's, diskless/follow) that
	// Recover reads in place of the bucket where the copy passes the object's checks.
	Cache ObjectCache
}

// Observer is told of each group held for the bucket once its commit object has landed:
// d is the time from the group entering the commit window (Commit) to that. It is called
// on the commit loop's goroutine and must not block.
type Observer interface {
	Committed(d time.Duration)
}

// Committer is the bucket side of the diskless topics (see the package comment).
type Committer struct {
	cfg         Config
	incarnation uint64
	log         *batchlog.Log // set by Recover

	pending atomic.Int64 // bytes of batches not yet in the bucket
	fenced  atomic.Bool
	// replaying: Recover is replaying the commit log into the log (TxnVerifier).
	replaying atomic.Bool
	stats     Stats

	descMu    sync.Mutex // held across Describe's PUT (a leaf: taken alone)
	described map[string]description

	mu      sync.Mutex
	objects []*object // oldest first; the last one takes new groups unless sealed
	free    [][]byte  // landed objects' buffers, kept for the next ones (recycle)
	// freeChunks: landed objects' chunks, kept for the next ones (recycle).
	freeChunks [][]byte
	ids        map[*batchlog.Partition][16]byte
	// undescribed: topics whose description must be checked before the next PUT (a
	// partition of theirs seen for the first time), so that no commit object names a topic
	// the bucket has no description of.
	undescribed []string
	closing     bool

	next    uint64 // the number of the next object; owned by the loop (and Recover before it)
	after   uint64 // the number of the last object sealed in the log (Header.After of the next)
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	started bool
	reaped  chan struct{}

	ck checkpointer // the fold of the landed objects and the checkpoints (checkpoint.go)
}

// Stats are the committer's counters.
type Stats struct {
	Puts, PutBytes, PutFailures, TimedOut atomic.Int64
	Fenced                                atomic.Bool
	LastCommitNanos                       atomic.Int64 // the last group's time from handover to publication
	// The last Recover's RecoverStats (set once it is done).
	RecoverObjects, RecoverCached, RecoverReplayed, RecoverUploaded, RecoverNanos atomic.Int64
}

// object is a commit object as it is built: its bytes are buf with each reference's batch
// inserted at its position (parts). A batch of smallBatch bytes or more stays in the request's
// frame, referenced; a smaller one is copied into the object's chunks (chunkBytes each, handed
// on when it lands) and referenced there, so that no buffer grows by copying itself.
type object struct {
	buf      []byte
	refs     []batchRef // in position order
	chunks   [][]byte
	refBytes int64 // the referenced batches' bytes
	entries  uint32
	payload  int64 // the entries' bytes
	// sum is the CRC-32C of the object's bytes past its header while summed (entrySum; an
	// object Recover uploads is not: seal reads it whole).
	sum    uint32
	summed bool
	groups []*heldGroup
	sealed bool // takes no more groups (set under mu)

	// The loop's, once sealed: the object's number, the one it follows, the epoch in its
	// header; a PUT in flight, landed; the PUTs failed in a row and when to try again;
	// stale: its number holds a stale writer's object (renumbered).
	seq, after, epoch uint64
	putting, landed   bool // written under mu (the reaper reads them)
	stale             bool
	failures          int
	retryAt           time.Time
}

// batchRef is a batch an object holds by reference: it goes after buf[:at]. owned: in the
// object's chunks (or a copy detach made), not in a request's frame.
type batchRef struct {
	at    int
	batch []byte
	owned bool
}

// smallBatch: a batch shorter than this is copied into the object's chunks rather than
// referenced in its request's frame (the frame is held until the answer either way, and each
// entry is two slices of the vectored write either way: the copy is not shown to gain anything
// over a reference, and putting the small entries' heads in the chunk beside their batches, so
// that a run of them goes out as one slice, is what would); chunkBytes: a chunk's size.
const (
	smallBatch = 4 << 10
	chunkBytes = 1 << 20
)

// size is the object's length.
func (o *object) size() int64 { return int64(len(o.buf)) + o.refBytes }

// body is the sealed object as a PUT sends it (parts), with its CRC-32C, which the bucket
// checks (objstore.Checksummed).
func (o *object) body() *objstore.Buffers {
	return objstore.NewBuffers(o.parts()).WithCRC32C(format.BodySum(o.buf))
}

// parts are the object's bytes, in order: the buffer cut at each reference's position, the
// batches between. Called holding mu, or by the loop once the object is sealed and its PUT
// not in flight.
func (o *object) parts() [][]byte {
	ps := make([][]byte, 0, 2*len(o.refs)+1)
	at := 0
	for _, r := range o.refs {
		ps = append(ps, o.buf[at:r.at], r.batch)
		at = r.at
	}
	return append(ps, o.buf[at:])
}

// detach copies the referenced batches still in request frames into memory of the object's
// own, so that their requests may be answered before it lands. Called holding mu, with no PUT
// of o in flight.
func (o *object) detach() {
	for i := range o.refs {
		if r := &o.refs[i]; !r.owned {
			r.batch, r.owned = bytes.Clone(r.batch), true
		}
	}
}

// entryList walks the object's entries (which this process built: nothing is checked), the
// batches and states aliasing it; for the fold of a landed object (checkpoint.go).
func (o *object) entryList() []Entry {
	body := o.buf[:len(o.buf)-format.TrailerLen]
	entries := make([]Entry, 0, o.entries)
	k := 0
	for pos := format.HeaderLen; pos < len(body); {
		var e Entry
		copy(e.TopicID[:], body[pos:])
		e.Partition = int32(binary.BigEndian.Uint32(body[pos+16:]))
		e.Base = int64(binary.BigEndian.Uint64(body[pos+20:]))
		n := int(binary.BigEndian.Uint32(body[pos+28:]))
		pos += format.EntryLen
		var data []byte
		if k < len(o.refs) && o.refs[k].at == pos {
			data = o.refs[k].batch
			k++
		} else {
			data = body[pos : pos+n : pos+n]
			pos += n
		}
		if e.Partition < 0 {
			e.State = data
		} else {
			e.Batch = data
		}
		entries = append(entries, e)
	}
	return entries
}

type heldGroup struct {
	g        *batchlog.DisklessGroup
	state    chan int16 // a state entry's answer (state.go), in place of g
	at       time.Time
	answered bool
}

// New makes a committer; it PUTs nothing before Recover.
func New(cfg Config) *Committer {
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = DefaultCommitInterval
	}
	if cfg.CommitBytes <= 0 {
		cfg.CommitBytes = DefaultCommitBytes
	}
	if cfg.MaxPutsInFlight <= 0 {
		cfg.MaxPutsInFlight = DefaultMaxPutsInFlight
	}
	cfg.MaxPutsInFlight = min(cfg.MaxPutsInFlight, MaxPutsInFlightLimit)
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var inc [8]byte
	_, _ = rand.Read(inc[:])
	return &Committer{cfg: cfg, incarnation: binary.BigEndian.Uint64(inc[:]) | 1, ids: map[*batchlog.Partition][16]byte{},
		described: map[string]description{},
		kick:      make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), reaped: make(chan struct{})}
}

// Stats returns the counters.
func (c *Committer) Stats() *Stats { return &c.stats }

// PendingBytes is the batch data held for the bucket and not in it yet (what
// MaxPendingBytes bounds).
func (c *Committer) PendingBytes() int64 { return c.pending.Load() }

// Admit is asked by the produce path for each batch to a diskless partition before it is
// submitted: 0 takes it, else the error (and its message) that refuses it.
func (c *Committer) Admit() (int16, string) {
	switch {
	case c.fenced.Load():
		return wire.ErrNotLeaderOrFollower, "this node was fenced: another writer took the bucket prefix"
	case c.pending.Load() >= c.cfg.MaxPendingBytes:
		return wire.ErrKafkaStorageError, "the bucket is not keeping up: diskless commit backlog full"
	}
	return 0, ""
}

// Commit takes a group durable locally (batchlog.DisklessCommitter): its batches join the open
// object (by reference, or copied if small), and it is published and answered once that
// object is in the bucket.
func (c *Committer) Commit(g *batchlog.DisklessGroup) {
	now := time.Now()
	c.mu.Lock()
	if c.fenced.Load() || c.closing {
		c.mu.Unlock()
		g.Answer(wire.ErrNotLeaderOrFollower)
		return
	}
	need := 0
	for _, a := range g.Appends {
		need += entryOverhead + len(a.Batch)
	}
	o := c.openObject(need)
	before := o.size()
	for _, a := range g.Appends {
		at := len(o.buf)
		o.buf = format.AppendEntryHead(o.buf, c.topicID(a.Partition), a.Partition.Index, a.BaseOffset, len(a.Batch))
		r := batchRef{at: len(o.buf), batch: a.Batch}
		if len(a.Batch) < smallBatch {
			r.batch, r.owned = c.chunkSpace(o, len(a.Batch)), true
			copy(r.batch, a.Batch)
		}
		o.refs = append(o.refs, r)
		o.refBytes += int64(len(a.Batch))
		o.sum = format.EntrySum(o.sum, o.buf[at:], a.Batch)
		o.entries++
	}
	o.payload += o.size() - before
	c.pending.Add(o.size() - before)
	o.groups = append(o.groups, &heldGroup{g: g, at: now})
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// entryOverhead is what appendEntry adds to a batch: topic id, partition, base offset, length.
const entryOverhead = 16 + 4 + 8 + 4

// openObject is the object that takes need more bytes of entries: the open one while they fit
// in CommitBytes (or it is empty), else a new one. A new object's buffer is one a landed
// object left (recycle), or a new one of objectBufBytes that grows as small batches are
// copied in. Called holding mu.
func (c *Committer) openObject(need int) *object {
	if n := len(c.objects); n > 0 {
		if o := c.objects[n-1]; !o.sealed && (o.size() == format.HeaderLen || o.size()+int64(need) <= int64(c.cfg.CommitBytes)) {
			return o
		}
	}
	var buf []byte
	if k := len(c.free); k > 0 {
		buf, c.free = c.free[k-1], c.free[:k-1]
	} else {
		buf = make([]byte, 0, objectBufBytes)
	}
	o := &object{buf: format.NewObject(buf), summed: true}
	c.objects = append(c.objects, o)
	return o
}

// objectBufBytes is a new object buffer's capacity: the heads of a full object's entries
// (32 bytes a batch) and its state entries.
const objectBufBytes = 256 << 10

// chunkSpace is n bytes at the end of o's last chunk, a new chunk (a landed object's, or
// made) when they do not fit. Called holding mu.
func (c *Committer) chunkSpace(o *object, n int) []byte {
	k := len(o.chunks) - 1
	if k < 0 || cap(o.chunks[k])-len(o.chunks[k]) < n {
		var ch []byte
		if f := len(c.freeChunks); f > 0 {
			ch, c.freeChunks = c.freeChunks[f-1], c.freeChunks[:f-1]
		} else {
			ch = make([]byte, 0, chunkBytes)
		}
		o.chunks = append(o.chunks, ch)
		k++
	}
	at := len(o.chunks[k])
	o.chunks[k] = o.chunks[k][:at+n]
	return o.chunks[k][at : at+n : at+n]
}

// recycle keeps a landed object's buffer for a next object: MaxPutsInFlight+1 at most, the
// objects being written and the one filling being all that a bucket that keeps up needs (and
// one once the loop is idle), and drops its references to the requests' frames. Called
// holding mu.
func (c *Committer) recycle(o *object) {
	if len(c.free) <= c.cfg.MaxPutsInFlight && cap(o.buf) <= c.cfg.CommitBytes+format.TrailerLen {
		c.free = append(c.free, o.buf[:0])
	}
	for _, ch := range o.chunks {
		if len(c.freeChunks) < c.maxFreeChunks() {
			c.freeChunks = append(c.freeChunks, ch[:0])
		}
	}
	o.buf, o.refs, o.chunks = nil, nil, nil
}

// maxFreeChunks bounds the chunks kept for next objects: as many as the objects in flight and
// the one filling could hold.
func (c *Committer) maxFreeChunks() int {
	return (c.cfg.MaxPutsInFlight + 1) * (c.cfg.CommitBytes/chunkBytes + 1)
}

// topicID is p's topic's id (the zero id for a topic deleted meanwhile: a restore skips it).
// Called holding mu.
func (c *Committer) topicID(p *batchlog.Partition) [16]byte {
	if id, ok := c.ids[p]; ok {
		return id
	}
	var id [16]byte
	if c.log != nil {
		if t, ok := c.log.Topic(p.Topic); ok {
			id = t.ID
		}
	}
	c.ids[p] = id
	c.undescribed = append(c.undescribed, p.Topic) // a new topic, or a partition added
	return id
}

// start begins the loop and the reaper (Recover calls it last).
func (c *Committer) start() {
	c.started = true
	go c.run()
	go c.reap()
	c.startCheckpoints() // checkpoint.go
}

// Close PUTs what is queued (for at most CloseTimeout while the bucket fails), answers what
// could not be PUT with KAFKA_STORAGE_ERROR (those batches stay in the local log: the next
// start uploads them), and stops. Call it after the log has closed.
func (c *Committer) Close() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.mu.Unlock()
	close(c.stop)
	if c.started {
		<-c.done
		<-c.reaped
		c.ck.wg.Wait() // checkpoint.go
	}
	c.failQueued(wire.ErrKafkaStorageError)
}

// putResult is what a PUT's goroutine hands back to the loop.
type putResult struct {
	o   *object
	err error
}

// run is the commit loop (see the package comment).
func (c *Committer) run() {
	defer close(c.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan putResult, c.cfg.MaxPutsInFlight)
	inflight := 0
	// halt ends the loop's PUTs in flight (cut short) and waits for their goroutines.
	halt := func() {
		cancel()
		for ; inflight > 0; inflight-- {
			<-results
		}
	}
	var lastPut, closeBy, idleSince time.Time
	renumber := false
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		now := time.Now()
		c.mu.Lock()
		closing := c.closing
		objs := c.objects // the loop alone takes objects off the front
		c.mu.Unlock()
		if closing && closeBy.IsZero() {
			closeBy = now.Add(c.cfg.CloseTimeout)
		}

		// Publish and answer the landed objects at the front, in number order.
		var wake time.Time
		for len(objs) > 0 && objs[0].landed {
			if err := c.writer(); err != nil {
				// Landed; still the writer? Otherwise the node that took the prefix may have
				// restored without this object: nothing of it is published or answered.
				if errors.Is(err, errFenced) {
					c.fence(err)
					halt()
					c.failQueued(wire.ErrNotLeaderOrFollower)
					return
				}
				wake = now.Add(50 * time.Millisecond)
				break
			}
			if objs[0].entries > 0 {
				c.foldLanded(objs[0].seq, objs[0].entryList()) // checkpoint.go: before its groups are published
			}
			c.publish(objs[0])
			objs = objs[1:]
		}

		switch {
		case closing && len(objs) == 0 && inflight == 0:
			return
		case closing && now.After(closeBy):
			halt()
			return // closing with the bucket down: Close answers the rest
		}

		if renumber && inflight == 0 {
			c.renumber(objs)
			renumber = false
		}
		open := false // an object not sealed yet: a kick brings nothing new
		if !renumber {
			notBefore := lastPut.Add(c.cfg.CommitInterval)
			if closing {
				notBefore = time.Time{}
			}
			for inflight < c.cfg.MaxPutsInFlight {
				o, at := c.nextPut(objs, now, notBefore)
				if o == nil {
					wake = earliest(wake, at)
					break
				}
				if err := c.startable(); err != nil {
					if errors.Is(err, errFenced) {
						c.fence(err)
						halt()
						c.failQueued(wire.ErrNotLeaderOrFollower)
						return
					}
					c.failed(o, err, now)
					continue
				}
				c.mu.Lock()
				o.putting = true
				body := o.body()
				c.mu.Unlock()
				inflight++
				lastPut = now
				if !closing {
					notBefore = now.Add(c.cfg.CommitInterval)
				}
				go func(o *object, key string) {
					results <- putResult{o, c.putOnce(ctx, key, body, o.epoch)}
				}(o, LogKey(o.seq))
			}
			if len(objs) > 0 && objs[0].landed {
				wake = now // an object with no entries landed at once: publish it
			}
		}
		c.mu.Lock()
		for _, o := range objs {
			open = open || !o.sealed
		}
		switch {
		case len(objs) > 0 || inflight > 0 || len(c.free) <= 1 && len(c.freeChunks) == 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = now
			wake = earliest(wake, now.Add(idleTrim))
		case now.Sub(idleSince) >= idleTrim:
			// Idle a while: one buffer kept for the next object, the other buffers and the
			// chunks left to the collector. (Not at every empty queue: flat out, the queue
			// empties between two groups, and new chunks cost their zeroing.)
			clear(c.free[1:])
			c.free = c.free[:1]
			clear(c.freeChunks)
			c.freeChunks = c.freeChunks[:0]
		}
		c.mu.Unlock()

		if closing {
			wake = earliest(wake, closeBy)
		}
		var tc <-chan time.Time
		if !wake.IsZero() {
			timer.Reset(time.Until(wake))
			tc = timer.C
		}
		var kick <-chan struct{}
		if !open {
			kick = c.kick
		}
		var stop <-chan struct{}
		if !closing {
			stop = c.stop
		}
		select {
		case r := <-results:
			inflight--
			if c.landed(r, time.Now()) {
				renumber = true
			}
			if c.fenced.Load() {
				halt()
				c.failQueued(wire.ErrNotLeaderOrFollower)
				return
			}
		case <-kick:
		case <-tc:
		case <-stop:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// idleTrim: the loop idle this long keeps one free object buffer.
const idleTrim = time.Second

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// nextPut is the object whose PUT starts now: the oldest sealed one not landed whose backoff
// is over, or else, while none is failing, the oldest open one, sealed and numbered here; none
// before notBefore (the interval since the last PUT started). An object with no entries (a
// group of duplicates only) is sealed and lands at once, with no PUT. Nil if none; then at is
// when one may start (zero: when a group arrives or a PUT ends).
func (c *Committer) nextPut(objs []*object, now, notBefore time.Time) (o *object, at time.Time) {
	failing := false
	for _, o := range objs {
		if !o.sealed {
			if failing {
				return nil, at
			}
			c.mu.Lock()
			empty := o.entries == 0
			if !empty && now.Before(notBefore) {
				c.mu.Unlock()
				return nil, notBefore
			}
			o.sealed = true
			o.landed = empty
			c.mu.Unlock()
			if empty {
				continue
			}
			c.number(o)
			return o, time.Time{}
		}
		switch {
		case o.landed || o.putting:
		case o.retryAt.After(now):
			failing = true
			at = earliest(at, o.retryAt)
		case now.Before(notBefore):
			return nil, notBefore
		default:
			return o, time.Time{}
		}
	}
	return nil, at
}

// startable is nil when a PUT may start: this node is the writer, and every topic the
// objects name has its description in the bucket (so that no commit object names a topic the
// bucket has no description of; on the loop, before any PUT starts, so none overtakes it).
func (c *Committer) startable() error {
	err := c.writer()
	if err == nil {
		err = c.describeNew()
	}
	return err
}

// number gives a sealed object the next number, following the last object sealed, and
// writes its header and trailer (the loop's, or Recover's before the loop starts).
func (c *Committer) number(o *object) {
	o.epoch = 0
	if c.cfg.Epoch != nil {
		o.epoch = c.cfg.Epoch()
	}
	o.seq, o.after = c.next, c.after
	c.next++
	c.after = o.seq
	h := Header{Epoch: o.epoch, Incarnation: c.incarnation, Sequence: o.seq, Node: c.cfg.NodeID, Entries: o.entries, After: o.after}
	if o.summed {
		o.buf = format.SealSum(o.buf, h, o.sum, o.size()-format.HeaderLen)
	} else {
		o.buf = format.Seal(o.buf, h) // Recover's: no references
	}
}

// renumber numbers again, past every number used, the first object whose number was taken by
// a stale writer's object and every object sealed after it (landed or not: each follows the
// one before it, and so the void number). The first names the object the void one followed,
// so that a restore skips the void number and every object numbered after it. Called with no
// PUT in flight.
func (c *Committer) renumber(objs []*object) {
	first := true
	for _, o := range objs {
		if !o.sealed {
			break
		}
		if first && !o.stale || o.entries == 0 {
			continue
		}
		if first {
			c.after = o.after
			first = false
		}
		c.cfg.Logger.Warn("diskless: commit object renumbered past a stale writer's object", "was", LogKey(o.seq), "after", LogKey(o.after))
		o.buf = o.buf[:len(o.buf)-format.TrailerLen]
		c.number(o)
		c.mu.Lock()
		o.landed = false
		c.mu.Unlock()
		o.stale, o.failures, o.retryAt = false, 0, time.Time{}
	}
}

// landed takes a PUT's result; true when a renumber is due (a stale writer's object took
// the number).
func (c *Committer) landed(r putResult, now time.Time) bool {
	o := r.o
	c.mu.Lock()
	o.putting = false
	o.landed = r.err == nil
	c.mu.Unlock()
	switch {
	case r.err == nil:
		o.failures = 0
		c.stats.Puts.Add(1)
		c.stats.PutBytes.Add(o.size())
	case errors.Is(r.err, errStale):
		// A writer that lost the prefix landed an object under this number after this node
		// took it: void it, by naming the last object of the log in the next one.
		c.cfg.Logger.Warn("diskless: a stale writer's object under the next number; skipped", "key", LogKey(o.seq), "err", r.err)
		o.stale = true
		return true
	case errors.Is(r.err, errFenced):
		c.fence(r.err)
	default:
		c.failed(o, r.err, now)
	}
	return false
}

// failed counts a failed PUT of o and sets its retry: 50 ms, doubling to 5 s.
func (c *Committer) failed(o *object, err error, now time.Time) {
	o.failures++
	c.stats.PutFailures.Add(1)
	if o.failures == 1 || o.failures%20 == 0 {
		c.cfg.Logger.Warn("diskless: commit object not written; retrying", "key", LogKey(o.seq), "attempt", o.failures, "err", err)
	}
	o.retryAt = now.Add(min(50*time.Millisecond<<min(o.failures-1, 7), 5*time.Second))
}

// publish takes the landed object at the front off the queue, publishes its groups' high
// watermarks in order and answers their requests.
func (c *Committer) publish(o *object) {
	c.mu.Lock()
	c.objects = c.objects[1:]
	c.recycle(o)
	var answer []*heldGroup
	for _, h := range o.groups {
		if !h.answered {
			h.answered = true
			answer = append(answer, h)
		}
	}
	c.mu.Unlock()
	c.pending.Add(-o.payload)
	for _, h := range o.groups {
		h.publish()
		if c.cfg.Observer != nil && h.g != nil {
			c.cfg.Observer.Committed(time.Since(h.at))
		}
	}
	for _, h := range answer {
		h.answer(0)
		c.stats.LastCommitNanos.Store(int64(time.Since(h.at)))
	}
}

// put writes o under the next number now, retrying until it lands: Recover's uploads, one at
// a time before the loop starts. False when the writer was fenced, or deadline passed.
func (c *Committer) put(o *object, deadline time.Time) bool {
	o.sealed = true
	c.number(o)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := c.startable()
		if err == nil {
			err = c.putOnce(context.Background(), LogKey(o.seq), o.body(), o.epoch)
		}
		if errors.Is(err, errStale) {
			c.cfg.Logger.Warn("diskless: a stale writer's object under the next number; skipped", "key", LogKey(o.seq), "err", err)
			o.stale = true
			c.renumber([]*object{o})
			attempt = 0
			continue
		}
		if err == nil {
			c.stats.Puts.Add(1)
			c.stats.PutBytes.Add(o.size())
			for err := c.writer(); err != nil; err = c.writer() {
				if errors.Is(err, errFenced) {
					c.fence(err)
					c.failQueued(wire.ErrNotLeaderOrFollower)
					return false
				}
				select {
				case <-time.After(50 * time.Millisecond):
				case <-c.stop:
					return false
				}
			}
			return true
		}
		if errors.Is(err, errFenced) {
			c.fence(err)
			c.failQueued(wire.ErrNotLeaderOrFollower)
			return false
		}
		c.stats.PutFailures.Add(1)
		if attempt == 1 || attempt%20 == 0 {
			c.cfg.Logger.Warn("diskless: commit object not written; retrying", "key", LogKey(o.seq), "attempt", attempt, "err", err)
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-time.After(min(backoff, time.Until(deadline))):
		case <-c.stop:
			return false
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

var (
	errFenced = errors.New("diskless: fenced")
	errStale  = errors.New("diskless: an older epoch's object")
)

var errNotWriter = errors.New("diskless: not the prefix's writer now (the lease is not held)")

// writer is nil while this node is the prefix's writer (Config.Writable, Config.Fenced).
func (c *Committer) writer() error {
	if c.cfg.Fenced != nil {
		select {
		case <-c.cfg.Fenced:
			return fmt.Errorf("%w: another node took the bucket prefix's lease", errFenced)
		default:
		}
	}
	if c.cfg.Writable != nil && !c.cfg.Writable() {
		return errNotWriter
	}
	return nil
}

// describeNew writes the descriptions of the topics listed in undescribed (Describe skips
// those this run wrote as they are).
func (c *Committer) describeNew() error {
	if c.log == nil {
		return nil
	}
	c.mu.Lock()
	names := c.undescribed
	c.undescribed = nil
	c.mu.Unlock()
	for i, name := range names {
		t, ok := c.log.Topic(name)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
		err := c.Describe(ctx, t)
		cancel()
		if err != nil {
			c.mu.Lock()
			c.undescribed = append(c.undescribed, names[i:]...)
			c.mu.Unlock()
			return err
		}
	}
	return nil
}

// putOnce makes one attempt at writing body under key. An object already there is this
// writer's own (a lost reply: nil), one of an older epoch than this writer's (errStale), or
// another writer's (errFenced). body is not read once putOnce returns.
func (c *Committer) putOnce(ctx context.Context, key string, body *objstore.Buffers, epoch uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	c.cfg.Gate.Begin()
	err := c.cfg.Bucket.Put(ctx, key, body, body.Len())
	c.cfg.Gate.End()
	if !errors.Is(err, objstore.ErrExists) {
		return err
	}
	own, err := isOwn(ctx, c.cfg.Bucket, key, body)
	switch {
	case err != nil:
		return err
	case !own:
		var hb [format.HeaderLen]byte
		if err := c.cfg.Bucket.ReadAt(ctx, key, 0, hb[:]); err != nil && !errors.Is(err, objstore.ErrOutOfRange) {
			return err
		}
		if string(hb[:4]) == format.Magic && binary.BigEndian.Uint64(hb[8:]) < epoch {
			return fmt.Errorf("%w: %s of epoch %d, this writer's %d", errStale, key, binary.BigEndian.Uint64(hb[8:]), epoch)
		}
		return fmt.Errorf("%w: %s was written by another writer", errFenced, key)
	}
	return nil
}

// isOwn reports whether the object at key holds exactly body: this writer's own PUT whose
// reply was lost (the incarnation in the header tells its objects from any other's).
func isOwn(ctx context.Context, b objstore.Bucket, key string, body *objstore.Buffers) (bool, error) {
	got := make([]byte, body.Len())
	err := b.ReadAt(ctx, key, 0, got)
	if errors.Is(err, objstore.ErrOutOfRange) {
		return false, nil // shorter
	}
	if err != nil {
		return false, err
	}
	for _, p := range body.Parts() {
		if !bytes.Equal(got[:len(p)], p) {
			return false, nil
		}
		got = got[len(p):]
	}
	var one [1]byte
	switch err := b.ReadAt(ctx, key, body.Len(), one[:]); {
	case errors.Is(err, objstore.ErrOutOfRange):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, nil // longer
}

// fence stops the writer: nothing more is written. Its caller then answers every request
// held NOT_LEADER_OR_FOLLOWER (failQueued: clients look for the partition's leader again),
// once no PUT is in flight (the frames).
func (c *Committer) fence(err error) {
	c.fenced.Store(true)
	c.stats.Fenced.Store(true)
	c.cfg.Logger.Error("diskless: fenced: another writer holds the bucket prefix; diskless produce refused from now on", "err", err)
}

// failQueued answers every held request not answered yet with code and drops the queue (its
// batches stay in the local log, unpublished).
func (c *Committer) failQueued(code int16) {
	c.mu.Lock()
	var answer []*heldGroup
	for _, o := range c.objects {
		for _, h := range o.groups {
			if !h.answered {
				h.answered = true
				answer = append(answer, h)
			}
		}
	}
	c.objects = nil
	c.pending.Store(0)
	c.mu.Unlock()
	for _, h := range answer {
		h.answer(code)
	}
}

// reap answers REQUEST_TIMED_OUT to the requests held past RequestTimeout. Their batches stay
// queued for the bucket, so their object first takes copies of them (detach). The groups of
// an object whose PUT is in flight wait for it to end (RequestTimeout bounds it too); those of
// a landed one are answered as it is published.
func (c *Committer) reap() {
	defer close(c.reaped)
	every := min(max(c.cfg.RequestTimeout/10, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-c.cfg.RequestTimeout)
		var answer []*heldGroup
		c.mu.Lock()
		for _, o := range c.objects {
			if o.putting || o.landed {
				continue // its batches are being sent, or folded (foldLanded) before its groups are published
			}
			for _, h := range o.groups {
				if !h.answered && h.at.Before(cutoff) {
					h.answered = true
					answer = append(answer, h)
					o.detach()
				}
			}
		}
		c.mu.Unlock()
		for _, h := range answer {
			h.answer(wire.ErrRequestTimedOut)
			c.stats.TimedOut.Add(1)
		}
	}
}
