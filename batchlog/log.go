// Package batchlog is Inlet's durable log: record batches in append-only segment files, and in
// Pebble their index, high watermarks, log starts and producer windows, written by one group
// committer over a storage seam (store.go; the segment files and their index are package
// segments'). The Pebble database is the catalog's (package meta, given at Open or opened by
// it): topic records, group offsets, transaction records, broker configs and ids live there
// and are written by meta, not by the committer. The log keeps the in-memory topic table the
// produce and fetch paths read (Topic, Topics), and asks meta to write a topic's record
// (synced) before it changes it. It asks the transaction coordinator, given at Open as a
// TxnVerifier (txn.go), about every transactional batch.
//
// # Commit pipeline (the default: --storage segments, direct I/O)
//
// Producers' requests arrive on a queue (Submit). One committer goroutine owns every piece of
// mutable log state (next offsets, producer windows) and loops:
//
//	drain the queue up to MaxGroupBytes
//	for each append: idempotence check against committed-plus-pending state (idem.State)
//	                 assign offsets, patch baseOffset into the batch, add it to the group
//	every CheckpointInterval: add the high watermarks and producer windows changed since
//	                 the last checkpoint to the group's Pebble batch (not applied yet)
//	stage the group: copy its entries into a block-aligned buffer (segments/segment.go)
//	hand the group to the completer
//
// The completer goroutine takes groups in order. For each one not yet durable it writes every
// staged group with O_DIRECT (one pwritev per segment) and syncs once (fdatasync); then it
// applies the group's index entries, and any checkpoint, to Pebble without a sync, publishes
// the new high watermarks, signals the long polls parked on those partitions (Waiter, wait.go)
// and tells every request it is done (Request.Completion, or Done).
// So while group N is being written and synced, the committer already builds group N+1, and
// under light load many groups share one fdatasync.
//
// Where O_DIRECT is refused (tmpfs; or --segment-io buffered) the completer writes the same
// staged buffers through the page cache. Other layouts: with --storage pebble the group is one
// Pebble batch, applied by the committer with ApplyNoSyncWait and waited for (SyncWait) by the
// completer; --storage discard stores nothing.
//
// Invariants:
//   - A request's Done runs only after every group up to and including the one holding its
//     appends is durable. A duplicate of a batch in an unsynced group is answered from a later
//     group, so it too is answered only after the original is durable.
//   - Published high watermarks (Partition.HighWatermark) never exceed what is durable.
//     Readers bound every read by the published high watermark, never by what the index or
//     a file shows.
//   - After a crash a retried batch is recognised as a duplicate exactly when its records
//     survived: replay (segments/segment.go) syncs the segments after the checkpoint before it
//     rebuilds offsets and windows from them. With --storage pebble, records, the high
//     watermark and the producer state that describes them are in one atomic batch.
//   - Nothing is named by a checkpoint or an index entry before it is durable: a group's
//     Pebble batch is applied only after its sync.
//
// A simpler design, the committer waiting for each fsync itself (bbolt's DB.Batch), leaves the
// CPU idle during every sync; pipelining one group keeps building and syncing overlapped.
//
// The upkeep passes (retention, compaction, the reclaim of segment files, producer expiry)
// are package upkeep's; upkeep_ops.go is what they may do to the log, reclaim.go the log's
// side of the reclaim (which segments can go, from the index, is package reclaimplan's; the
// copies forward), whose file side (the candidates, reading a batch, deleting files) is
// package segments'.
//
// Files: log.go (Open, recovery and the replay of the segments' tail, the topic table,
// Submit), commit.go (the committer and completer), store.go (the store seam, the segment
// store behind it, the pebble and discard layouts; the segment store's operations the log
// calls by name), startcheck.go (the start-up check of the metadata against the segments),
// readplan.go (PlanRead, AppendPlanned; the Pebble layout's plans), stats.go, upkeep_ops.go
// (the passes' operations), reclaim.go (space per partition), nospace.go (a full disk),
// txn.go (transactions on the partition), topics_admin.go (topic changes, DeleteRecords),
// broker_configs.go (the broker configs in force as topic defaults), keys.go (the log's
// Pebble keys), producers.go (the producer windows' map and counts; the bound is package
// windows'). Package segments (segments/): the segment files, the write paths, replay,
// the index's encoding, read plans, the tail cache and the recent index.
//
// Lock order: Log.retainMu before Log.topicsMu (and before the segment store's locks, package
// segments); none is held while waiting on the committer, except retainMu by an upkeep pass
// (Log.RunPass; so the committer only TryLocks it). Under topicsMu the log calls meta's
// synced writes, which take no lock of the log's.
package batchlog

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/batchlog/segments"
	"inlet/idem"
	"inlet/meta"
	"inlet/segfs"
	"inlet/topicconfig"
	"inlet/wire"
)

// Options configure Open.
type Options struct {
	// Dir is the Pebble directory. Ignored when Discard is set.
	Dir string
	// Meta is the catalog, opened on Dir by the caller (meta.Open, or meta.Discard with
	// Discard): the log keeps its own keys in its Pebble database. Open takes it over: Close,
	// or a failed Open, closes it. Nil: Open opens it, with Dir, MemTableSize and PebbleFS.
	Meta *meta.Store
	// Discard acknowledges without storing anything (benchmark ceiling only).
	Discard bool
	// Layout chooses where record data lives: LayoutSegments (the default: append-only segment
	// files, index and metadata in Pebble) or LayoutPebble (record batches as Pebble values).
	Layout string
	// SegmentBytes is the size at which a new segment file is started.
	SegmentBytes int64
	// BufferedSegments writes segment files through the page cache even where
	// O_DIRECT is available (see segments/segment.go); for comparison and tests.
	BufferedSegments bool
	// CheckpointInterval is how often the segments layout writes high watermarks and producer
	// windows to Pebble with the checkpoint they are exact for (recovery rebuilds them from
	// the segments after it). 0 means the default, 100 ms; negative, with every group.
	CheckpointInterval time.Duration
	// FetchCacheBytes bounds the tail cache of the segments layout: the buffers of the groups
	// written last, kept so that reads of recent data come from memory (segments/readplan.go). 0 means
	// the default, 64 MiB; negative, no cache.
	FetchCacheBytes int64
	// MaxGroupBytes caps the record bytes of one group commit. It must stay below
	// MemTableSize/2: Pebble turns larger batches into flushable batches.
	MaxGroupBytes int
	// MemTableSize is Pebble's memtable size (with Meta, the one it was opened with).
	MemTableSize uint64
	Logger       *slog.Logger
	// OnFatal is called when a group cannot be written or synced. The log cannot continue
	// after that (a later group may not be acknowledged while an earlier one is in doubt);
	// the default logs and exits the process, as Pebble itself does on a failed WAL write.
	OnFatal func(error)
	// Observer, when set, is told of every durable group and every segment fsync (metrics).
	Observer Observer
	// Txns, the transaction coordinator, is asked about every transactional batch (txn.go).
	// Nil: every transactional batch is refused (INVALID_TXN_STATE).
	Txns TxnVerifier
	// MinFreeBytes suspends writes (appends answered KAFKA_STORAGE_ERROR, as on a full disk)
	// while the segments' file system has less free space than this, checked every 100 ms by
	// the committer: Pebble then never meets a full disk, which it cannot survive (a failed
	// WAL write stops it). 0: no reserve.
	MinFreeBytes int64
	// SegmentFS is the file system of the segment files (default segfs.OS), and PebbleFS
	// Pebble's (default the operating system's): tests put file systems under the log that
	// forget what was not synced when they crash (segfs.MemFS, vfs.NewCrashableMem).
	SegmentFS segfs.FS
	PebbleFS  vfs.FS
	// MaxProducerWindows bounds the producer windows (one per producer id and partition) the
	// node holds, MaxProducerWindowsPerPrincipal those one principal's batches made: at a bound,
	// a batch that needs a new window evicts the least recently written window idle for
	// ProducerIdleEviction, or is refused THROTTLING_QUOTA_EXCEEDED (producers.go). 0 means
	// DefaultMaxProducerWindows (node) and no bound (principal); negative, no bound.
	MaxProducerWindows             int
	MaxProducerWindowsPerPrincipal int
	// ProducerIdleEviction is how long a window must go unwritten before it may be evicted;
	// 0 means DefaultProducerIdleEviction.
	ProducerIdleEviction time.Duration
	Diskless             DisklessCommitter // finishes the groups with diskless appends (diskless.go)
}

// Observer receives the commit pipeline's measurements as they happen; what is state (high
// watermarks, segment bytes, Pebble's health) is read when wanted instead (Log.Stats). Its
// methods run on the completer goroutine, once per group or sync, never per request: they
// must be quick and must not block.
type Observer interface {
	// GroupDurable reports a group of requests made durable: the records and bytes of record
	// data it appended (duplicates and refused batches are not appended), and the time from
	// the committer starting to build it to its sync returning.
	GroupDurable(records, bytes int, d time.Duration)
	// Synced reports one fdatasync of a segment file and how long it took. With record data
	// in Pebble (LayoutPebble) the syncs are Pebble's own (Stats.Pebble's WAL fsync latency).
	Synced(d time.Duration)
}

// Record-data layouts (Options.Layout).
const (
	LayoutSegments = "segments"
	LayoutPebble   = "pebble"
)

const (
	defaultMaxGroupBytes = 16 << 20
	defaultMemTableSize  = 64 << 20
)

// Topic is a topic's immutable description; changes replace the whole value.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []*Partition
	Configs    map[string]string    // overrides as set by CreateTopics / AlterConfigs
	Creator    string               // the principal that created it ("": unknown, or the node)
	Settings   topicconfig.Settings // Configs parsed: what produce and retention act on
}

// Partition is one partition's log position. Next offsets are owned by the committer;
// HighWatermark is what readers may see.
type Partition struct {
	ID       uint32 // node-wide partition id, the key prefix of its data
	Topic    string
	Index    int32
	diskless bool // its topic's diskless.enable, fixed at creation

	next     int64  // committer-owned: next offset to assign
	metaGen  uint64 // committer-owned: groupScratch.gen when next last changed
	hw       atomic.Int64
	logStart atomic.Int64
	// localStart is the first offset still stored on this node (KIP-405's local log start):
	// below it, up to logStart, a topic with remote storage has its batches only in the
	// remote tier. Always >= logStart, and equal to it for a topic without remote storage.
	// Everything that reads the local index (reads, replay, the reclaim, the start-up check)
	// goes by it; the aborted index, the LSO clamp and what clients are told of the log's
	// start go by logStart. Stored to make the invariant hold while both grow: localStart
	// before logStart.
	localStart atomic.Int64
	// relocatedBelow: batches below it may have been copied forward into newer segments than
	// batches above it (reclaim.go). Written by the committer as it copies them, read by the
	// reclaim pass.
	relocatedBelow atomic.Int64
	// txn: open transactions, the last stable offset and the aborted index (txn.go).
	txn txnState
	// cleanedTo: a compacted partition's batches below it were compacted by the last pass
	// (Pass.MarkCompacted).
	cleanedTo atomic.Int64
	// waiters: the long polls parked on this partition (wait.go), signalled by the completer
	// as it publishes an advance.
	waiters partWaiters
}

// HighWatermark is the offset after the last durable record.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LogStartOffset is the first offset of the partition's log, across tiers (ListOffsets
// earliest, DeleteRecords, Fetch's log_start_offset).
func (p *Partition) LogStartOffset() int64 { return p.logStart.Load() }

// LocalLogStartOffset is the first offset still stored on this node (ListOffsets
// earliest-local, -4): LogStartOffset unless the remote tier holds batches the node has
// dropped (Pass.AdvanceLocalStart). Never below LogStartOffset.
func (p *Partition) LocalLogStartOffset() int64 { return p.localStart.Load() }

// LeaderEpoch is the leader epoch stamped into every batch the partition appends: 0. Clients
// are told the lease epoch (server's Config.LeaderEpoch; 0 without a bucket), which rises at
// every takeover and is never below the batches' (in Kafka too, batches of earlier leaders
// carry lower epochs); OffsetForLeaderEpoch answers every epoch up to the current one, so
// nothing needs to store it.
func (p *Partition) LeaderEpoch() int32 { return 0 }

// Append is one batch of a produce request, for one partition.
type Append struct {
	Partition *Partition
	// Batch is the validated record batch. The committer writes its base offset in place
	// (bytes 0..7, outside the CRC) before storing it, so Batch must stay untouched by others
	// until Done.
	Batch         []byte
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	NumRecords    int32
	// LogAppendTime makes the committer stamp the batch with the commit time (the topic's
	// message.timestamp.type=LogAppendTime): the timestamp is the append time, so it is set
	// when offsets are assigned, and the CRC recomputed (wire.SetLogAppendTime).
	LogAppendTime bool
	// Relocate marks a copy of a stored batch, already at BaseOffset, that the reclaim pass
	// moves forward out of an old segment (reclaim.go): it is written again as it is, with
	// no offset assigned and no producer window touched.
	Relocate bool
	// Transactional is the batch's transactional attribute: it opens the producer's
	// transaction on the partition, or continues it (txn.go).
	Transactional bool
	// Marker makes the append a transaction marker built by MarkerAppend (txn.go).
	Marker Marker

	// Results, valid in Done.
	BaseOffset     int64
	LogStartOffset int64
	AppendTime     int64 // the LogAppendTime stamped, or -1
	Err            int16
}

// Request is what one produce request submits. Appends whose Err is already set (validation
// failures) are skipped by the committer and answered with that error.
type Request struct {
	Appends []Append
	// TransactionalID is the produce request's, which its transactional batches are checked
	// against (txn.go).
	TransactionalID string
	// Principal is the user the request's connection acts as: the windows its batches make
	// count against Options.MaxProducerWindowsPerPrincipal (producers.go).
	Principal string
	// Done is called once, from the completer goroutine, after the request's appends are
	// durable (or refused). It must not block for long: it runs on the commit path.
	Done func(*Request)
	// Completion, when set, is told in place of Done: the form for a request that lives in a
	// pooled value (the produce path's), which implements it once, so submitting binds no
	// closure.
	Completion Completion
	// Inspect, when set, runs on the committer goroutine as the request joins a group, before
	// its appends: it may read committer-owned state (producer windows), which then includes
	// every request submitted before. Done follows once that group is durable, so what
	// Inspect saw is durable by then. It must be quick: the committer waits for it.
	Inspect func()
	held    bool // an append to a diskless partition: answered by the diskless committer
}

// Completion is told once, on the completer goroutine, that a request's appends are durable
// (or refused), with the same rules as Request.Done.
type Completion interface {
	Completed(*Request)
}

type producerKey struct {
	id        int64
	partition uint32
}

// Log is the durable log of one node.
type Log struct {
	opts  Options
	log   *slog.Logger
	store Store
	segs  *segments.Store // the store, with the segments layout; nil otherwise (store.go)
	db    *pebble.DB      // meta's database, holding the log's keys too; nil in discard mode
	meta  *meta.Store     // the catalog: topic records, broker configs (package meta)

	queue   chan *Request
	pending chan *pendingGroup
	stop    chan struct{}
	done    sync.WaitGroup
	closed  atomic.Bool
	failed  atomic.Bool
	// suspended: a segment write ran out of space (nospace.go); until resume succeeds, every
	// append is answered KAFKA_STORAGE_ERROR. suspendedAt is when (unix ns), for the retry
	// after noSpaceRetry.
	suspended    atomic.Bool
	suspendedAt  atomic.Int64
	noSpaceRetry time.Duration

	topicsMu sync.RWMutex
	topics   map[string]*Topic
	// partitionsHeld counts the partitions of topics, changed under topicsMu (PartitionCount);
	// partitionsBy those of each creator but "" (PartitionCountOf), under topicsMu.
	partitionsHeld atomic.Int64
	partitionsBy   map[string]int
	// Dynamic broker configs by BrokerLevel, and the topic defaults they give
	// (broker_configs.go); under topicsMu.
	brokerConfigs [2]map[string]string
	topicDefaults map[string]string
	partSeq       uint32 // the next partition id (meta.Store.PartitionSeq at start-up)

	// Producer windows held, evicted and refused (producers.go; Stats), written by the
	// committer.
	windowsHeld                    atomic.Int64
	windowsEvicted, windowsRefused atomic.Uint64

	retainMu       sync.Mutex   // serialises log-start changes (upkeep passes, DeleteRecords)
	relocatedBytes atomic.Int64 // bytes copied forward by the reclaim pass (Stats)
	compacted      compactionCounts

	// noFinalCheckpoint makes Close leave the metadata changed since the last checkpoint to
	// replay, as a crash does (set by tests of the replay before Close: export_test.go).
	noFinalCheckpoint bool

	// committer-owned
	lastFreeCheck time.Time // when the committer last read the free space (MinFreeBytes)
	producers     map[producerKey]*window
	windows       windowLists // the windows by last write (producers.go)
	scratch       groupScratch
	free          chan *pendingGroup
}

// pendingGroup is an applied group awaiting its sync.
type pendingGroup struct {
	g        Group
	requests []*Request
	advances []hwAdvance
	aborts   []abortedAdd // aborted transactions to publish with the group (txn.go)
	dl       *DisklessGroup
	// barrier, set alone, is closed by the completer when it reaches it (resume).
	barrier chan struct{}

	// For Options.Observer: when the committer started the group (set only with an
	// observer), and the records and bytes it appended.
	start          time.Time
	records, bytes int
}

type hwAdvance struct {
	p       *Partition
	hw, lso int64
}

// advance records p's new high watermark and last stable offset, published when pg is durable.
func (pg *pendingGroup) advance(p *Partition) {
	advances := &pg.advances
	if pg.dl != nil && p.diskless {
		advances = &pg.dl.advances // published by DisklessGroup.Publish
	}
	lso := p.next
	if len(p.txn.ongoing) > 0 {
		lso = p.stableOffset()
	}
	if n := len(*advances); n > 0 && (*advances)[n-1].p == p {
		(*advances)[n-1].hw, (*advances)[n-1].lso = p.next, lso
		return
	}
	for i := range *advances {
		if (*advances)[i].p == p {
			(*advances)[i].hw, (*advances)[i].lso = p.next, lso
			return
		}
	}
	*advances = append(*advances, hwAdvance{p: p, hw: p.next, lso: lso})
}

// Open opens (or creates) the log and recovers its state. The upkeep passes (retention,
// compaction, reclaim, producer expiry) are package upkeep's, started beside it.
func Open(opts Options) (*Log, error) { return open(opts, defaultNoSpaceRetry) }

// open is Open with how long writes stay suspended after a full disk (tests shorten it).
func open(opts Options, noSpaceRetry time.Duration) (*Log, error) {
	if opts.MaxGroupBytes <= 0 {
		opts.MaxGroupBytes = defaultMaxGroupBytes
	}
	if opts.Meta != nil && opts.Meta.MemTableSize() != 0 {
		opts.MemTableSize = opts.Meta.MemTableSize()
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = defaultMemTableSize
	}
	if uint64(opts.MaxGroupBytes) >= opts.MemTableSize/2 {
		if opts.Meta != nil {
			opts.Meta.Close()
		}
		return nil, fmt.Errorf("batchlog: MaxGroupBytes %d must be below MemTableSize/2 (%d)", opts.MaxGroupBytes, opts.MemTableSize/2)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.MaxProducerWindows == 0:
		opts.MaxProducerWindows = DefaultMaxProducerWindows
	case opts.MaxProducerWindows < 0:
		opts.MaxProducerWindows = 0
	}
	if opts.MaxProducerWindowsPerPrincipal < 0 {
		opts.MaxProducerWindowsPerPrincipal = 0
	}
	if opts.ProducerIdleEviction == 0 {
		opts.ProducerIdleEviction = DefaultProducerIdleEviction
	}
	if opts.OnFatal == nil {
		logger := opts.Logger
		opts.OnFatal = func(err error) {
			logger.Error("batchlog: commit failed; stopping", "err", err)
			os.Exit(1)
		}
	}
	l := &Log{
		opts:      opts,
		log:       opts.Logger,
		topics:    map[string]*Topic{},
		producers: map[producerKey]*window{},

		noSpaceRetry: noSpaceRetry,
	}
	l.meta = opts.Meta
	if l.meta == nil {
		if opts.Discard {
			l.meta = meta.Discard(opts.Logger)
		} else {
			m, err := meta.Open(meta.Options{Dir: opts.Dir, MemTableSize: opts.MemTableSize, FS: opts.PebbleFS, Logger: opts.Logger})
			if err != nil {
				return nil, err
			}
			l.meta = m
		}
	}
	if opts.Discard {
		l.store = discardStore{}
	} else {
		db := l.meta.DB()
		l.db = db
		switch opts.Layout {
		case "", LayoutSegments:
			ss, err := l.openSegments()
			if err != nil {
				l.closeMeta()
				return nil, fmt.Errorf("batchlog: open segments: %w", err)
			}
			l.store, l.segs = segmentLayout{ss}, ss
		case LayoutPebble:
			l.store = &pebbleStore{db: db, free: make(chan *pebbleGroup, 4)}
		default:
			l.closeMeta()
			return nil, fmt.Errorf("batchlog: unknown layout %q", opts.Layout)
		}
		if err := l.recover(); err != nil {
			l.store.Close()
			l.closeMeta()
			return nil, err
		}
	}
	l.start()
	return l, nil
}

// openSegments opens the segment store. A node's first start, or a directory lost with every
// segment in it, finds no segments directory: the catalog says which. Data the catalog names
// is never served as empty; nothing is changed.
func (l *Log) openSegments() (*segments.Store, error) {
	opts := l.opts
	fs := opts.SegmentFS
	if fs == nil {
		fs = segfs.OS
	}
	cfg := segments.Config{SegmentBytes: opts.SegmentBytes, Buffered: opts.BufferedSegments,
		CheckpointInterval: opts.CheckpointInterval, CacheBytes: opts.FetchCacheBytes, Logger: opts.Logger}
	if opts.Observer != nil {
		cfg.Observer = opts.Observer
	}
	ss, err := segments.Open(fs, opts.Dir, l.db, false, cfg)
	if !errors.Is(err, segments.ErrNoDirectory) {
		return ss, err
	}
	if what, err := catalogNamesData(l.meta); err != nil {
		return nil, err
	} else if what != "" {
		return nil, fmt.Errorf("batchlog: %s is missing, but the metadata names %s: the segment files are gone; start-up stopped, nothing changed", segments.Dir(opts.Dir), what)
	}
	return segments.Open(fs, opts.Dir, l.db, true, cfg)
}

func (l *Log) start() {
	l.queue = make(chan *Request, 4096)
	// One group may be syncing while the next is built and applied; a third waits here.
	l.pending = make(chan *pendingGroup, 2)
	l.free = make(chan *pendingGroup, 4)
	l.stop = make(chan struct{})
	l.done.Add(2)
	go l.commitLoop()
	go l.completeLoop()
}

// closeMeta closes the catalog, the log's since Open.
func (l *Log) closeMeta() error { return l.meta.Close() }

// Meta is the catalog the log keeps its topics in: group offsets, transaction records, broker
// configs and ids are read and written there directly.
func (l *Log) Meta() *meta.Store { return l.meta }

func (l *Log) recover() error {
	get := func(k []byte) ([]byte, bool, error) {
		v, c, err := l.db.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		out := append([]byte(nil), v...)
		c.Close()
		return out, true, nil
	}
	l.partSeq = l.meta.PartitionSeq()
	if err := l.loadBrokerConfigs(); err != nil {
		return err
	}
	recs, err := l.meta.Topics()
	if err != nil {
		return err
	}
	byID := map[uint32]*Partition{}
	for _, rec := range recs {
		t := &Topic{Name: rec.Name, ID: rec.ID, Configs: rec.Configs, Settings: l.parse(rec.Configs), Creator: rec.Creator}
		for i, id := range rec.Partitions {
			p := &Partition{ID: id, Topic: rec.Name, Index: int32(i), diskless: t.Settings.Diskless}
			t.Partitions = append(t.Partitions, p)
			byID[id] = p
		}
		l.topics[rec.Name] = t
		l.countPartitions(t.Creator, len(t.Partitions))
	}
	// Two layouts cannot share a directory: the data keys mean different things.
	layout := []byte(LayoutPebble)
	if l.segs != nil {
		layout = []byte(LayoutSegments)
	}
	if v, ok, err := get(metaLayout); err != nil {
		return err
	} else if ok && string(v) != string(layout) {
		return fmt.Errorf("batchlog: %s holds the %q layout, not %q", l.opts.Dir, v, layout)
	} else if !ok {
		if err := l.db.Set(metaLayout, layout, pebble.Sync); err != nil {
			return err
		}
	}
	if err := l.loadLogState(byID, true); err != nil {
		return err
	}
	if l.segs != nil {
		if err := l.replaySegments(l.segs, byID); err != nil {
			return err
		}
		if err := l.checkSegmentsHoldMetadata(l.segs, byID); err != nil {
			return err
		}
	}
	if err := l.loadTxnState(byID); err != nil {
		return err
	}
	l.orderWindows()
	return nil
}

// raiseStarts raises each partition's log start or local log start (at) to what its key of
// kind holds, where that is later.
func (l *Log) raiseStarts(byID map[uint32]*Partition, kind byte, at func(*Partition) *atomic.Int64) error {
	return l.scan([]byte{kind}, func(k, v []byte) error {
		if len(k) != highKeyLen || len(v) != 8 {
			return fmt.Errorf("batchlog: corrupt %c start key %x", kind, k)
		}
		if p := byID[binary.BigEndian.Uint32(k[1:])]; p != nil && int64(binary.BigEndian.Uint64(v)) > at(p).Load() {
			at(p).Store(int64(binary.BigEndian.Uint64(v)))
		}
		return nil
	})
}

// loadLogState sets every partition's next offset and relocated key, and the producer windows,
// from Pebble: as of the last group that carried metadata, for replay to go on from. At
// start-up it also publishes high watermarks and log starts; after a full disk (rebuild) the
// ones published are right, and a partition with no key in Pebble starts again at 0.
func (l *Log) loadLogState(byID map[uint32]*Partition, startup bool) error {
	for _, p := range byID {
		p.next = 0
		p.relocatedBelow.Store(0)
	}
	var err error
	err = l.scan([]byte{kindHigh}, func(k, v []byte) error {
		if len(k) != highKeyLen || len(v) != 16 {
			return fmt.Errorf("batchlog: corrupt high watermark key %x", k)
		}
		p := byID[binary.BigEndian.Uint32(k[1:])]
		if p == nil {
			return nil // a deleted topic's leftovers
		}
		p.next = int64(binary.BigEndian.Uint64(v))
		if startup {
			p.hw.Store(p.next)
			p.logStart.Store(int64(binary.BigEndian.Uint64(v[8:])))
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Log starts moved by retention and DeleteRecords live in their own keys (the committer
	// writes high-watermark keys concurrently); the later of the two wins. After start-up the
	// ones in memory are right.
	if startup {
		if err := l.raiseStarts(byID, kindLogStart, func(p *Partition) *atomic.Int64 { return &p.logStart }); err != nil {
			return err
		}
		// Local starts moved by Pass.AdvanceLocalStart; one below the log start (the log start
		// moved past it since, which writes no local key) or none at all (a directory from
		// before local starts, a partition never tiered) is the log start.
		for _, p := range byID {
			p.localStart.Store(p.logStart.Load())
		}
		if err := l.raiseStarts(byID, kindLocal, func(p *Partition) *atomic.Int64 { return &p.localStart }); err != nil {
			return err
		}
	}
	err = l.scan([]byte{kindCleaned}, func(k, v []byte) error {
		if len(k) != highKeyLen || len(v) != 8 {
			l.skipBadKey("compacted-to mark", k, errors.New("wrong length")) // the next pass redoes the work
			return nil
		}
		if p := byID[binary.BigEndian.Uint32(k[1:])]; p != nil {
			p.cleanedTo.Store(int64(binary.BigEndian.Uint64(v)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = l.scan([]byte{kindRelocate}, func(k, v []byte) error {
		if len(k) != highKeyLen || len(v) != 8 {
			return fmt.Errorf("batchlog: corrupt relocated key %x", k)
		}
		if p := byID[binary.BigEndian.Uint32(k[1:])]; p != nil {
			p.relocatedBelow.Store(int64(binary.BigEndian.Uint64(v)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	l.producers = map[producerKey]*window{}
	l.windows = windowLists{}
	err = l.scan([]byte{kindProducer}, func(k, v []byte) error {
		if len(k) != producerKeyLen {
			return fmt.Errorf("batchlog: corrupt producer key %x", k)
		}
		key := producerKey{int64(binary.BigEndian.Uint64(k[1:])), binary.BigEndian.Uint32(k[9:])}
		st := &window{Key: key}
		if err := st.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("batchlog: producer state %x: %w", k, err)
		}
		l.producers[key] = st
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}

// replaySegments re-applies the segment entries written after Pebble's checkpoint: offsets,
// high watermarks, producer windows and index entries, exactly as the committer would have,
// then stores the result in one synced Pebble batch.
func (l *Log) replaySegments(ss *segments.Store, byID map[uint32]*Partition) error {
	b := l.db.NewBatch()
	defer b.Close()
	touched := map[*Partition]bool{}
	touchedProducers := map[producerKey]bool{}
	relocated := map[*Partition]bool{}
	putIndex := func(partition uint32, base int64, seg uint32, pos int64, size int) {
		var k [dataKeyLen]byte
		var v [segments.LocLen]byte
		putDataKey(k[:], partition, base)
		_ = b.Set(k[:], segments.AppendLoc(v[:0], segments.Loc{Seg: seg, Pos: pos, Length: size}), nil)
	}
	var lastSeg uint32
	var lastEnd int64
	replayed := 0
	l.topicsMu.RLock() // topics may be created meanwhile after a full disk (rebuild)
	partSeq := l.partSeq
	l.topicsMu.RUnlock()
	err := ss.Replay(func(partition uint32, batch []byte, seg uint32, pos int64) error {
		p := byID[partition]
		if p == nil && partition < partSeq {
			// A partition of a deleted topic: ids are never reused, so its entries are
			// orphans a produce racing the deletion wrote. Skip them.
			return nil
		}
		if p == nil {
			return fmt.Errorf("batchlog: segment %d at %d names unknown partition %d", seg, pos, partition)
		}
		h, err := wire.ParseBatchHeader(batch)
		if err != nil {
			return fmt.Errorf("batchlog: segment %d at %d: %w", seg, pos, err)
		}
		base, count := h.BaseOffset, h.NumRecords
		if base < p.next {
			// A copy the reclaim pass moved forward (reclaim.go): index it where it lies
			// now, unless retention (or the local retention of a tiered topic) has dropped
			// it since.
			end := base + int64(h.LastOffsetDelta) + 1
			if end <= p.localStart.Load() {
				return nil
			}
			if end > p.relocatedBelow.Load() {
				p.relocatedBelow.Store(end)
				relocated[p] = true
			}
			putIndex(partition, base, seg, pos, len(batch))
			lastSeg, lastEnd = seg, pos+int64(len(batch))
			replayed++
			return nil
		}
		if base != p.next {
			return fmt.Errorf("batchlog: segment %d at %d: partition %d batch at offset %d, expected %d", seg, pos, partition, base, p.next)
		}
		p.next = base + int64(count)
		touched[p] = true
		if pid := h.ProducerID; pid >= 0 {
			key := producerKey{pid, partition}
			st := l.producers[key]
			if st == nil {
				st = &window{State: idem.NewState(), Key: key} // linked by orderWindows
				l.producers[key] = st
			}
			if !h.IsControl() {
				st.Push(h.ProducerEpoch, h.BaseSequence, count, base)
			}
			if err := replayTxn(b, p, &st.State, h, batch, seg, pos); err != nil {
				return err
			}
			st.LastWrite = time.Now().UnixMilli() // written after the checkpoint: counts from this start-up
			touchedProducers[key] = true
		}
		if base+int64(count) > p.localStart.Load() {
			// Below the local log start (retention, DeleteRecords or local retention moved it
			// past batches written after the checkpoint), a batch is gone from this node: its
			// index entry stays deleted.
			putIndex(partition, base, seg, pos, len(batch))
		}
		lastSeg, lastEnd = seg, pos+int64(len(batch))
		replayed++
		return nil
	}, func(seg uint32, end int64) (bool, error) { return l.indexedPast(byID, seg, end) })
	if err != nil {
		return err
	}
	if replayed == 0 {
		return nil
	}
	for p := range touched {
		v := binary.BigEndian.AppendUint64(nil, uint64(p.next))
		_ = b.Set(partKey(nil, kindHigh, p.ID), binary.BigEndian.AppendUint64(v, uint64(p.logStart.Load())), nil)
	}
	for p := range relocated {
		_ = b.Set(partKey(nil, kindRelocate, p.ID), binary.BigEndian.AppendUint64(nil, uint64(p.relocatedBelow.Load())), nil)
	}
	for key := range touchedProducers {
		var k [producerKeyLen]byte
		putProducerKey(k[:], key.id, key.partition)
		_ = b.Set(k[:], l.producers[key].AppendBinary(nil), nil)
	}
	_ = b.Set(metaCheckpoint, segments.AppendCheckpoint(nil, lastSeg, lastEnd), nil)
	l.log.Info("batchlog: replayed segment tail", "batches", replayed, "segment", lastSeg, "position", lastEnd)
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	// Published once the index names every batch below them: after a full disk (rebuild)
	// readers go on meanwhile, and a high watermark must never go back. The long polls
	// parked on them see the batches the replay made durable at once.
	for p := range touched {
		p.hw.Store(p.next)
		p.wake()
	}
	return nil
}

// indexedPast reports whether the index names a batch of the partitions of byID in segment
// seg at or after end, or in a later segment. A partition's batches lie in non-decreasing
// segments along its index except below its relocated key (reclaim.go), so its last entry and
// the entries below that key are the ones to look at.
func (l *Log) indexedPast(byID map[uint32]*Partition, seg uint32, end int64) (bool, error) {
	past := func(v []byte) (bool, error) {
		loc, err := segments.ParseLoc(v)
		return err == nil && (loc.Seg > seg || loc.Seg == seg && loc.Pos >= end), err
	}
	for _, p := range byID {
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(p.ID, 0), UpperBound: dataKey(p.ID+1, 0)})
		if err != nil {
			return false, err
		}
		found := false
		if it.Last() {
			found, err = past(it.Value())
		}
		for valid := it.First(); err == nil && !found && valid && dataKeyOffset(it.Key()) < p.relocatedBelow.Load(); valid = it.Next() {
			found, err = past(it.Value())
		}
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

func (l *Log) scan(prefix []byte, fn func(k, v []byte) error) error {
	return meta.Scan(l.db, prefix, fn)
}

// Topic returns the named topic.
func (l *Log) Topic(name string) (*Topic, bool) {
	l.topicsMu.RLock()
	t, ok := l.topics[name]
	l.topicsMu.RUnlock()
	return t, ok
}

// Topics returns every topic, sorted by name.
func (l *Log) Topics() []*Topic {
	l.topicsMu.RLock()
	out := make([]*Topic, 0, len(l.topics))
	for _, t := range l.topics {
		out = append(out, t)
	}
	l.topicsMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ErrTopicExists is returned by CreateTopic for a name already in use.
var ErrTopicExists = errors.New("topic already exists")

// CreateTopic creates a topic durably: the topic record is synced before it is returned, so
// no batch can be stored for a topic a restart would not know.
func (l *Log) CreateTopic(name string, partitions int, configs map[string]string) (*Topic, error) {
	return l.CreateTopicBy(name, partitions, configs, "")
}

// CreateTopicBy is CreateTopic for a request of principal creator: the topic's partitions
// count against it (PartitionCountOf), now and after a restart (meta.TopicRecord.Creator).
func (l *Log) CreateTopicBy(name string, partitions int, configs map[string]string, creator string) (*Topic, error) {
	if partitions <= 0 {
		return nil, fmt.Errorf("batchlog: topic %q needs at least one partition", name)
	}
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	if t, ok := l.topics[name]; ok {
		return t, ErrTopicExists
	}
	t := &Topic{Name: name, Configs: configs, Settings: l.parse(configs), Creator: creator}
	_, _ = rand.Read(t.ID[:])
	seq := l.partSeq
	for i := 0; i < partitions; i++ {
		p := &Partition{ID: seq, Topic: name, Index: int32(i), diskless: t.Settings.Diskless}
		t.Partitions = append(t.Partitions, p)
		seq++
	}
	if err := l.meta.SaveTopic(t.record(), seq); err != nil {
		return nil, fmt.Errorf("batchlog: create topic %q: %w", name, err)
	}
	l.partSeq = seq
	l.topics[name] = t
	l.countPartitions(t.Creator, len(t.Partitions))
	return t, nil
}

// OffsetsTopic is Kafka's internal topic of committed offsets. Inlet keeps committed offsets in
// Pebble keys (offsets.go), not in a topic, but clients expect the topic in Metadata, marked
// internal: regex consumers skip it, tools list it. It is created as Kafka creates it, when a
// group coordinator is first looked up (EnsureOffsetsTopic), with Kafka's defaults
// (offsets.topic.num.partitions 50, cleanup.policy compact), and holds no records: clients
// cannot append to it.
const OffsetsTopic = "__consumer_offsets"

const offsetsTopicPartitions = 50

// Internal reports whether t is one of Kafka's internal topics (Topic.isInternal).
func (t *Topic) Internal() bool { return t.Name == OffsetsTopic }

// EnsureOffsetsTopic creates OffsetsTopic if it does not exist yet, and returns it.
func (l *Log) EnsureOffsetsTopic() (*Topic, error) {
	if t, ok := l.Topic(OffsetsTopic); ok {
		return t, nil
	}
	t, err := l.CreateTopic(OffsetsTopic, offsetsTopicPartitions, map[string]string{"cleanup.policy": "compact"})
	if errors.Is(err, ErrTopicExists) {
		return t, nil
	}
	return t, err
}

// Submit queues r for the next group commit. r.Done is called exactly once, after the
// commit that holds its appends is durable. Submit must not be called after Close.
func (l *Log) Submit(r *Request) {
	l.queue <- r
}

// Close commits everything already submitted, answers it, and closes the store. A pass
// under way (Log.RunPass) sees the log closing, stops early, and is waited for.
func (l *Log) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(l.stop)
	l.done.Wait()
	l.retainMu.Lock()
	defer l.retainMu.Unlock()
	err := l.store.Close()
	if cerr := l.closeMeta(); err == nil {
		err = cerr
	}
	return err
}

// errSegmentGone: an index entry read names a segment that has been reclaimed since.
var errSegmentGone = segments.ErrSegmentGone

// ProducerWindow is what the log remembers of one idempotent producer on one partition
// (DescribeProducers).
type ProducerWindow struct {
	ProducerID    int64
	Epoch         int16
	LastSequence  int32 // of the last batch; -1 with none remembered
	LastTimestamp int64 // the last batch's max timestamp; -1 when unknown (its batch is gone)
	// TxnStartOffset is the first offset of the producer's open transaction here; -1: none.
	TxnStartOffset int64
}

// Producers lists the producers with a window on p, by id. The windows are the committer's,
// read through a request of no appends (Request.Inspect), and answered once durable.
func (l *Log) Producers(p *Partition) ([]ProducerWindow, error) {
	type seen struct {
		w    ProducerWindow
		base int64
	}
	var found []seen
	done := make(chan struct{})
	l.Submit(&Request{
		Inspect: func() {
			for k, st := range l.producers {
				if k.partition != p.ID {
					continue
				}
				s := seen{w: ProducerWindow{ProducerID: k.id, Epoch: st.Epoch, LastSequence: -1, LastTimestamp: -1, TxnStartOffset: st.TxnFirstOffset}, base: -1}
				if b, ok := st.Last(); ok {
					s.w.LastSequence, s.base = b.LastSeq, b.BaseOffset
				}
				found = append(found, s)
			}
		},
		Done: func(*Request) { close(done) },
	})
	<-done
	out := make([]ProducerWindow, 0, len(found))
	for _, s := range found {
		if s.base >= p.LocalLogStartOffset() && l.db != nil {
			buf, err := l.readStored(p, s.base)
			if errors.Is(err, errSegmentGone) {
				buf, err = nil, nil // reclaimed since the check: its time is unknown
			}
			if err != nil {
				return nil, err
			}
			if len(buf) >= 61 { // else the batch is gone (retention): its time is unknown
				s.w.LastTimestamp = wire.BatchMaxTimestamp(buf)
			}
		}
		out = append(out, s.w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out, nil
}
