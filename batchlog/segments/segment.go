// Package segments is the record log's storage: record batches in append-only segment files
// under <dir>/segments, and in the log's Pebble database (the catalog's, package meta) their
// index (a data key per batch naming its segment, position and length) and the checkpoint.
// High watermarks, producer windows and every other key stay the log's (package batchlog);
// a group carries them in the Pebble batch it commits after its data is durable.
//
// Why: storing record batches as Pebble values costs every byte a copy into the batch, a WAL
// write, a copy into the memtable arena and a blob-file write at flush (about 3.4 ns of CPU per
// byte measured here, write amplification 2). A segment file is the write-ahead log itself:
// the committer copies each group's entries into a staging buffer, the completer writes it
// and makes it durable with one fdatasync, and only then applies a small unsynced Pebble batch
// holding the group's index entries. Every Config.CheckpointInterval a group's batch also
// holds the high watermarks and producer windows changed since the last such group and the
// segment position it covers (the checkpoint): Pebble's metadata is always whole as of its
// checkpoint.
//
// Recovery: Pebble holds a consistent prefix of those batches (an unsynced tail may be lost),
// and its checkpoint says how far the segments are indexed. Everything after it is replayed
// from the segment files, whose entries are self-describing: partition, then the record batch
// with its base offset, sequence numbers and CRC. Replay stops at the first entry that does not
// check out (a torn write of a group that was never acknowledged) and truncates there.
//
// Entry layout: partition u32, crc32c(partition bytes || batch[0:21]) u32, then the batch. The
// batch's own CRC covers bytes 21..end; the header CRC covers the rest of the batch header.
//
// One write path. A buffered write into the page cache cost about 1 ns of CPU per byte in the
// server (three quarters of its CPU; profiles/README.md), an O_DIRECT write about 0.15 ns plus
// a memmove into an aligned buffer. So the committer only copies a group's entries into a
// block-aligned staging buffer (zero-padded to a whole block; every group starts on a block
// boundary), and the completer writes the staged groups of a segment with one pwritev, with
// O_DIRECT where the file system allows it and through the page cache where it is refused
// (tmpfs; or Config.Buffered), then syncs. Writing in the completer keeps the committer
// from waiting on the device, and groups reach the file strictly in order: a
// segment's groups are written and synced before the next segment's are written, so a crash
// can tear only the last segment's unacknowledged groups. Replay skips the padding: an entry
// that fails its checks at an unaligned position followed only by zeros up to the next
// boundary is padding.
//
// The recovery invariant: nothing replayed is built on (indexed, checkpointed, answered as a
// duplicate) before it is durable; Replay syncs every segment from the checkpoint on before it
// reads them (Store.Replay says why and what it cuts). Nothing is named by a checkpoint or an
// index entry before it is durable: a group's Pebble batch is committed only after its sync.
//
// The path that runs: the committer (the log's commit.go) calls NewGroup, SetData per batch,
// Set and Del for the log's own keys, CarriesMetadata every checkpoint interval, and Apply,
// which stages the group's entries into a block-aligned buffer (rolling to a new segment
// when the active one is full); the completer calls Wait in order, which writes every staged
// group (one pwritev per segment), syncs each segment once, commits the group's index and
// metadata to Pebble unsynced and fills the read caches; then Release. Reads (PlanRead,
// ReadPlan.AppendTo) find batches in the recent index or Pebble, and copy them from the tail
// cache or the file.
//
// Files: segment.go (the segment set, Open, Replay and the torn-tail cut, the checkpoint
// position, groups and the write paths, rolling, the full-disk errors), index.go (the data
// key, the index value and the checkpoint encodings; EachIndexedBatch), readplan.go (read
// plans, the tail cache), recent.go (the recent index), reclaim.go (the file side of the
// reclaim: candidates, reading a live batch, deleting files), startcheck.go (the file side
// of the start-up check). Errors and log lines keep the log's prefix, "batchlog:".
//
// Lock order: Store.mu (the segment set), Store.stagedMu, tailCache.mu and recentIndex.mu
// are each taken alone, and none is held across a write, a sync or a read of a file; only
// recentIndex.mu is held while a ring's mu (recentRing.mu) is taken (forgetAll), never the
// other way. Readers copy a ring's entries out before they read a file.
package segments

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"log/slog"
	"math/bits"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"inlet/segfs"
	"inlet/wire"
)

// Store is the segment files of one data directory and their index in Pebble (the package
// comment says how they are written and recovered). The log holds it behind its store seam:
// NewGroup, PlanRead, MetadataInterval, DropUnwritten and Close are the seam's; the other
// exported methods are the operations the log's recovery, reclaim, start-up check and stats
// call by name.
type Store struct {
	fs       segfs.FS
	log      *slog.Logger
	dir      string
	db       *pebble.DB
	segBytes int64

	mu     sync.RWMutex // guards segs for readers
	segs   map[uint32]*segment
	active *segment // committer-owned

	free chan *Group
	// stages pools the block-aligned staging buffers of groups released and of those the
	// tail cache let go, by size (stageClass). Pools of their own size, so that a small group
	// never takes a large buffer (which the tail cache counts whole: one 16 MiB buffer per
	// small group held four groups in 64 MiB); sync.Pools, so that a node that stops writing
	// lets them go after two collections (four kept 16 MiB buffers were 64 MiB of live heap
	// through a catch-up read, where the memory limit then ran the collector back to back).
	stages [stageClasses]sync.Pool // *stageBuf

	cold coldReaders // the helpers that read a plan's cold runs beside its reader (coldread.go)

	// staged holds direct-path groups the committer has staged and the completer has not yet
	// written, in apply order. The completer writes all of them, then syncs once (flushStaged).
	stagedMu sync.Mutex
	staged   []*Group
	flushing []*Group // completer-owned scratch
	iov      [][]byte // completer-owned scratch

	buffered bool // never use O_DIRECT (Config.Buffered)

	obs SyncObserver // Config.Observer: told of every fdatasync; nil: none

	// tail holds the staging buffers of the groups written last (Config.CacheBytes;
	// nil: none); evicted is the completer's scratch for the buffers it pushes out.
	tail    *tailCache
	evicted []*stageBuf

	// recent holds the index entries of each partition's last batches (recent.go).
	recent recentIndex

	checkpointEvery time.Duration // Config.CheckpointInterval; 0: every group
}

type segment struct {
	id     uint32
	f      segfs.File                 // buffered: reads, syncs, and writes when direct I/O is unavailable
	direct atomic.Pointer[directFile] // O_DIRECT writer until the last group is written; nil where refused
	// rd is the O_DIRECT reader of cold reads (coldread.go), open for the segment's life; nil
	// where the store writes through the page cache or the file system refuses (reads use f).
	rd segfs.File
	// usesDirect: the segment was opened with an O_DIRECT writer (direct may be nil later,
	// once its last group is written).
	usesDirect bool
	size       int64        // committer-owned: bytes assigned to groups (block-aligned when direct)
	final      atomic.Int64 // size when the segment stopped being active (-1 while active)
	// directEnd is where the completer's last direct write ended. The writer is closed once
	// directEnd reaches final, by whichever of the committer (roll) and the completer
	// (writeDirect) sees both values last.
	directEnd atomic.Int64
	// refs counts the store's map (one, until DeleteBelow takes the segment out of it)
	// and the reads in progress: the file is closed when the last of them lets go, so a read
	// never meets a closed file and nothing waits on a timer.
	refs atomic.Int64
}

// directFile holds a segment's O_DIRECT writer (an interface value cannot be swapped atomically).
type directFile struct{ f segfs.File }

// acquire takes a reference to segment id for a read, or returns nil if it has been reclaimed;
// the reader lets go with unref.
func (s *Store) acquire(id uint32) *segment {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seg := s.segs[id]
	if seg != nil {
		seg.refs.Add(1)
	}
	return seg
}

// unref lets go of one reference; the last closes the file.
func (seg *segment) unref() {
	if seg.refs.Add(-1) == 0 {
		_ = seg.f.Close()
		if seg.rd != nil {
			_ = seg.rd.Close()
		}
	}
}

// EntryHeaderLen is the length of an entry's header (partition, CRC) before its batch.
const EntryHeaderLen = segEntryHeader

const (
	segEntryHeader     = 8
	defaultSegmentSize = 256 << 20
	// blockSize is the alignment of direct writes: each group starts on a block boundary and
	// is zero-padded to the next one.
	blockSize = segfs.BlockSize
)

func alignUp(n int64) int64 { return (n + blockSize - 1) &^ (blockSize - 1) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(id uint32) string { return fmt.Sprintf("%010d.seg", id) }

// Config is how a Store writes and caches.
type Config struct {
	// SegmentBytes is the size at which a new segment file is started (0: 256 MiB).
	SegmentBytes int64
	// Buffered writes through the page cache even where O_DIRECT is available.
	Buffered bool
	// CheckpointInterval is how often groups carry high watermarks and producer windows
	// (MetadataInterval). 0 means DefaultCheckpointInterval; negative, with every group.
	CheckpointInterval time.Duration
	// CacheBytes bounds the tail cache (readplan.go). 0 means DefaultCacheBytes; negative, no
	// cache.
	CacheBytes int64
	// Observer, when set, is told of every fdatasync.
	Observer SyncObserver
	Logger   *slog.Logger
}

// SyncObserver is told of every fdatasync of a segment file and how long it took. It runs on
// the completer goroutine: it must be quick and must not block.
type SyncObserver interface {
	Synced(d time.Duration)
}

// ErrNoDirectory is Open's answer where dir holds no segments directory.
var ErrNoDirectory = errors.New("batchlog: no segments directory")

// Dir is the segments directory of the data directory dir.
func Dir(dir string) string { return filepath.Join(dir, "segments") }

// Open opens the segment files of the data directory dir, whose index lives in db. Where
// there is no segments directory it answers ErrNoDirectory, unless create is set: then it
// makes it, durably (a node's first start; the caller has checked that the metadata names
// no data, so that a directory lost with every segment in it is not served as empty).
func Open(fs segfs.FS, dir string, db *pebble.DB, create bool, cfg Config) (*Store, error) {
	segBytes := cfg.SegmentBytes
	if segBytes <= 0 {
		segBytes = defaultSegmentSize
	}
	s := &Store{fs: fs, dir: Dir(dir), db: db, segBytes: segBytes, segs: map[uint32]*segment{},
		free: make(chan *Group, 4), buffered: cfg.Buffered,
		obs: cfg.Observer, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	switch {
	case cfg.CheckpointInterval == 0:
		s.checkpointEvery = DefaultCheckpointInterval
	case cfg.CheckpointInterval > 0:
		s.checkpointEvery = cfg.CheckpointInterval
	}
	switch {
	case cfg.CacheBytes == 0:
		s.tail = &tailCache{limit: DefaultCacheBytes}
	case cfg.CacheBytes > 0:
		s.tail = &tailCache{limit: int(cfg.CacheBytes)}
	}
	names, err := fs.List(s.dir)
	if errors.Is(err, iofs.ErrNotExist) {
		if !create {
			return nil, fmt.Errorf("%w: %s", ErrNoDirectory, s.dir)
		}
		err = segfs.MkdirAllSynced(fs, s.dir)
	}
	if err != nil {
		return nil, err
	}
	for _, e := range names {
		name, ok := strings.CutSuffix(e, ".seg")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			continue
		}
		seg, err := s.openSegment(uint32(id), false)
		if err != nil {
			s.closeFiles()
			return nil, err
		}
		s.segs[uint32(id)] = seg
	}
	return s, nil
}

// Checkpoint reads how far the segments are indexed in Pebble.
func (s *Store) Checkpoint() (seg uint32, pos int64, err error) {
	v, c, err := s.db.Get(CheckpointKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	return parseCheckpoint(v)
}

// Replay calls fn for every valid entry after the checkpoint, in write order, cuts a torn
// tail, and makes the newest segment active.
//
// The recovery invariant: nothing replayed is built on (indexed, checkpointed, answered as a
// duplicate) before it is durable. A group written (O_DIRECT or pwritev) by a process killed
// before its fdatasync is readable but not durable: so every segment from the checkpoint on is
// synced first, and what replay then reads is what a power loss would keep.
//
// Only the last segment that holds data can hold a torn write: a segment is synced whole
// before anything is written to the next one (the completer syncs a segment's last groups
// before it writes the next segment's; on the buffered path roll syncs it), though the next
// one may already exist, empty (roll creates it before the completer has written the last
// groups of this one). So an entry that does not check out in the last segment with data is
// a torn write of groups never acknowledged, and is cut (the file truncated and synced).
// Anywhere else it is corruption of synced data, and a read that fails is a failing device:
// start-up stops with an error naming the file and the offset, and nothing is changed.
//
// Before cutting, replay asks whether the index names anything at or after the cut: index
// entries are applied only after their group's sync, so one there proves the data synced, and
// the bad entry corrupt; start-up stops. What is not told apart: a flipped bit in synced data
// whose later entries Pebble had not made durable yet (their index is written without a
// sync), from a torn write. Several groups may be written before one sync (flushStaged), so
// valid entries after a bad one prove nothing by themselves. Such a bit costs the entries
// after it in that segment (at most one checkpoint interval of writes), and no index entry is
// left naming the part cut.
//
// indexedPast reports whether the index names a batch in segment seg at or after end (or in
// a later segment): before cutting there, replay asks, since a batch is indexed only once it
// is synced, so an indexed batch past a bad entry proves the entry corrupt, not torn.
func (s *Store) Replay(fn func(partition uint32, batch []byte, seg uint32, pos int64) error,
	indexedPast func(seg uint32, end int64) (bool, error)) error {
	ckSeg, ckPos, err := s.Checkpoint()
	if err != nil {
		return err
	}
	ids := make([]uint32, 0, len(s.segs))
	for id := range s.segs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if ckSeg != 0 || ckPos != 0 {
		// The checkpoint names a position that was durable when it was written: the
		// segment holding it is never reclaimed, and nothing before it is cut.
		seg := s.segs[ckSeg]
		if seg == nil || seg.size < ckPos {
			size := int64(-1)
			if seg != nil {
				size = seg.size
			}
			return fmt.Errorf("batchlog: the checkpoint names %s at %d, past its data (size %d): the segment files do not match the metadata; start-up stopped, nothing changed",
				filepath.Join(s.dir, segmentName(ckSeg)), ckPos, size)
		}
	}
	for _, id := range ids {
		if id >= ckSeg {
			if err := s.segs[id].f.Datasync(); err != nil {
				return fmt.Errorf("batchlog: sync %s before replaying it: %w", s.segs[id].f.Name(), &syncFailed{err})
			}
		}
	}
	// The last segment that holds data: segments after it are empty (roll creates the next
	// segment before the completer has written the last groups of this one).
	lastData := -1
	for i, id := range ids {
		if s.segs[id].size > 0 {
			lastData = i
		}
	}
	for i, id := range ids {
		seg := s.segs[id]
		if id < ckSeg {
			continue
		}
		pos := int64(0)
		if id == ckSeg {
			pos = ckPos
		}
		end, why, err := s.replaySegment(seg, pos, fn)
		if err != nil {
			return err
		}
		if end == seg.size {
			continue
		}
		if i < lastData {
			return fmt.Errorf("batchlog: segment %s is corrupt at %d (%s), and a later segment holds data, so this is not a torn write; start-up stopped, nothing changed",
				seg.f.Name(), end, why)
		}
		if past, err := indexedPast(id, end); err != nil {
			return err
		} else if past {
			return fmt.Errorf("batchlog: segment %s is corrupt at %d (%s), and the index names data after it, which was synced, so this is not a torn write; start-up stopped, nothing changed",
				seg.f.Name(), end, why)
		}
		if err := s.cutTornTail(seg, end); err != nil {
			return err
		}
	}
	if len(s.segs) > 0 {
		last := uint32(0)
		for id := range s.segs {
			last = max(last, id)
		}
		s.active = s.segs[last]
		for id, seg := range s.segs {
			if id != last {
				seg.final.Store(seg.size)
				seg.closeWriter() // only the active segment is written
			}
		}
		// Groups start on a block boundary: the file is extended with zeros (padding, to
		// replay) to the next one, and synced, so that a checkpoint at the aligned end (a
		// group that writes nothing moves it there) never names a position past the file.
		if aligned := alignUp(s.active.size); aligned != s.active.size {
			if err := s.active.f.Truncate(aligned); err != nil {
				return fmt.Errorf("batchlog: pad %s to a block boundary: %w", s.active.f.Name(), err)
			}
			if err := s.active.f.Datasync(); err != nil {
				return fmt.Errorf("batchlog: sync %s after padding it: %w", s.active.f.Name(), &syncFailed{err})
			}
			s.active.size = aligned
		}
		s.active.directEnd.Store(s.active.size)
	}
	return nil
}

// cutTornTail truncates the last segment at end, where an entry does not check out, and
// syncs it.
func (s *Store) cutTornTail(seg *segment, end int64) error {
	s.log.Warn("batchlog: cutting the torn tail of the last segment (a write never acknowledged)",
		"file", seg.f.Name(), "at", end, "bytes", seg.size-end)
	if err := seg.f.Truncate(end); err != nil {
		return fmt.Errorf("batchlog: cut the torn tail of %s at %d: %w", seg.f.Name(), end, err)
	}
	if err := seg.f.Datasync(); err != nil {
		return fmt.Errorf("batchlog: sync %s after cutting its torn tail: %w", seg.f.Name(), &syncFailed{err})
	}
	seg.size = end
	return nil
}

func entryHeaderValid(hdr []byte) bool {
	crc := crc32.Update(crc32.Checksum(hdr[0:4], castagnoli), castagnoli, hdr[8:8+21])
	return crc == binary.BigEndian.Uint32(hdr[4:])
}

// zeroTo reports whether every byte of r in [from, to) that exists is zero; a failing read is
// an error, not padding.
func zeroTo(r *io.SectionReader, from, to int64) (bool, error) {
	buf := make([]byte, to-from)
	n, err := r.ReadAt(buf, from)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	for _, c := range buf[:n] {
		if c != 0 {
			return false, nil
		}
	}
	return true, nil
}

// replaySegment calls fn for each valid entry of seg from pos on. It returns where it
// stopped: seg.size, or the position of an entry that does not check out and why.
func (s *Store) replaySegment(seg *segment, pos int64, fn func(uint32, []byte, uint32, int64) error) (int64, string, error) {
	r := io.NewSectionReader(seg.f, 0, seg.size)
	var hdr [segEntryHeader + 61]byte
	var buf []byte
	for pos < seg.size {
		n, err := r.ReadAt(hdr[:], pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return pos, "", fmt.Errorf("batchlog: read %s at %d: %w; start-up stopped, nothing changed", seg.f.Name(), pos, err)
		}
		if n < len(hdr) || !entryHeaderValid(hdr[:]) {
			if next := alignUp(pos); next != pos {
				zero, err := zeroTo(r, pos, next)
				if err != nil {
					return pos, "", fmt.Errorf("batchlog: read %s at %d: %w; start-up stopped, nothing changed", seg.f.Name(), pos, err)
				}
				if zero {
					pos = next // the padding after a direct-written group
					continue
				}
			}
			if n < len(hdr) {
				return pos, "an entry header cut short by the end of the file", nil
			}
			return pos, "an entry header that fails its checksum", nil
		}
		partition := binary.BigEndian.Uint32(hdr[0:])
		size := 12 + int64(binary.BigEndian.Uint32(hdr[8+8:]))
		if size < 61 {
			return pos, fmt.Sprintf("a batch length of %d", size), nil
		}
		if pos+segEntryHeader+size > seg.size {
			return pos, "an entry cut short by the end of the file", nil
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := r.ReadAt(buf, pos+segEntryHeader); err != nil {
			// Inside the file's size: not a torn write but a failing read.
			return pos, "", fmt.Errorf("batchlog: read %s at %d: %w; start-up stopped, nothing changed", seg.f.Name(), pos+segEntryHeader, err)
		}
		if !wire.BatchCRCValid(buf) {
			return pos, "a record batch that fails its CRC-32C", nil
		}
		if err := fn(partition, buf, seg.id, pos+segEntryHeader); err != nil {
			return pos, "", err
		}
		pos += segEntryHeader + size
	}
	return pos, "", nil
}

// openSegment opens (or, with create, creates) segment id and, unless the store writes
// through the page cache, its O_DIRECT writer where the file system takes one.
func (s *Store) openSegment(id uint32, create bool) (*segment, error) {
	path := filepath.Join(s.dir, segmentName(id))
	var f segfs.File
	var err error
	if create {
		f, err = s.fs.Create(path)
	} else {
		f, err = s.fs.Open(path)
	}
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	seg := &segment{id: id, f: f, size: size}
	seg.refs.Store(1)
	seg.final.Store(-1)
	if !s.buffered {
		if d, err := s.fs.OpenDirect(path); err == nil {
			seg.direct.Store(&directFile{d})
			seg.usesDirect = true
		}
		// Direct reads only of a file written directly: one written through the page cache
		// would be written back first by every direct read of its dirty pages.
		if o, ok := s.fs.(directReadFS); ok && seg.usesDirect {
			if r, err := o.OpenReadDirect(path); err == nil {
				seg.rd = r
			}
		}
	}
	return seg, nil
}

func (seg *segment) closeWriter() {
	if d := seg.direct.Swap(nil); d != nil {
		d.f.Close()
	}
}

// roll starts a new active segment. The directory is synced so the new file's name is durable
// before anything in it is acknowledged. (The completer syncs a segment's last groups before
// it writes the next segment's, so only the last segment can ever hold a torn write.)
func (s *Store) roll() error {
	id := uint32(0)
	if s.active != nil {
		id = s.active.id + 1
	}
	seg, err := s.openSegment(id, true)
	if err != nil {
		return fmt.Errorf("batchlog: create segment %d: %w", id, &writeFailed{err})
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("batchlog: sync %s after creating segment %d: %w", s.dir, id, &syncFailed{err})
	}
	s.mu.Lock()
	s.segs[id] = seg
	s.mu.Unlock()
	if s.active != nil {
		// Its writer stays open until the completer has written its last group (writeDirect).
		s.active.final.Store(s.active.size)
		if s.active.directEnd.Load() == s.active.size {
			s.active.closeWriter()
		}
	}
	s.active = seg
	return nil
}

// Group is one group: the iovecs of its entries, the index entries they produce, and
// the metadata batch applied after the data is durable.
type Group struct {
	s       *Store
	seg     *segment
	start   int64 // position of the group's first entry in seg
	end     int64
	batches [][]byte // the request buffers of its entries, until staged
	headers []byte
	index   []indexEntry
	meta    *pebble.Batch
	stage   []byte    // the group's entries, block-aligned and padded, in box
	box     *stageBuf // the staging buffer, until Release or the tail cache takes it
	durable bool      // written and synced (possibly by an earlier group's wait)
	// metadata: the group holds the high watermarks and producer windows changed since the
	// previous such group, so its end is a checkpoint (CarriesMetadata).
	metadata bool
	empty    bool // no entries, nothing staged (stageEntries)
	// dropped lists the partitions whose index entries the group deletes.
	dropped []uint32
}

type indexEntry struct {
	partition uint32
	relocated bool // see SetData
	base      int64
	pos       int64
	length    uint32
}

// NewGroup starts a group (the log's Store.NewGroup; groups and their Pebble batches are
// recycled through a small free list).
func (s *Store) NewGroup(int) *Group {
	var g *Group
	select {
	case g = <-s.free:
	default:
		g = &Group{s: s}
	}
	g.seg = nil
	g.durable = false
	g.metadata = false
	g.empty = false
	g.batches = g.batches[:0]
	g.headers = g.headers[:0]
	g.index = g.index[:0]
	g.dropped = g.dropped[:0]
	g.meta = s.db.NewBatch()
	return g
}

// SetData adds a batch's entry: its header now, its bytes when the group is staged (Apply).
func (g *Group) SetData(partition uint32, base int64, batch []byte, relocated bool) {
	g.headers = binary.BigEndian.AppendUint32(g.headers, partition)
	crc := crc32.Update(crc32.Checksum(g.headers[len(g.headers)-4:], castagnoli), castagnoli, batch[:21])
	g.headers = binary.BigEndian.AppendUint32(g.headers, crc)
	g.batches = append(g.batches, batch)
	g.index = append(g.index, indexEntry{partition: partition, relocated: relocated, base: base, length: uint32(len(batch))})
}

// Set adds one of the log's keys to the group's Pebble batch, committed after the data is
// durable.
func (g *Group) Set(key, value []byte) { _ = g.meta.Set(key, value, nil) }

// Del deletes one of the log's keys in the group's Pebble batch.
func (g *Group) Del(key []byte) {
	if len(key) == DataKeyLen && key[0] == KindData {
		// A batch compaction emptied: the recent index forgets the partition (recent.go).
		g.dropped = append(g.dropped, binary.BigEndian.Uint32(key[1:]))
	}
	_ = g.meta.Delete(key, nil)
}

// CarriesMetadata makes the group's end the checkpoint.
func (g *Group) CarriesMetadata() { g.metadata = true }

// DefaultCheckpointInterval is how often groups carry high watermarks and producer windows (and
// so move the checkpoint; Config.CheckpointInterval). Written with every group they were two
// thirds of the keys inserted into Pebble at moderate load (a high watermark and a producer
// window per partition per request, beside one index entry per batch), and Pebble's memtable
// inserts a third of the server's CPU. Replay rebuilds both from the segment data after the
// checkpoint, so a longer interval only lengthens replay after a crash (at most this long of
// writes) and keeps segment files after the checkpoint from being reclaimed that much longer.
const DefaultCheckpointInterval = 100 * time.Millisecond

// MetadataInterval is how often a group must carry metadata: Config.CheckpointInterval.
func (s *Store) MetadataInterval() time.Duration { return s.checkpointEvery }

// Apply stages the group at the end of the active segment, starting a new segment when the
// active one is full.
func (g *Group) Apply() error {
	s := g.s
	if s.active == nil || s.active.size >= s.segBytes {
		if err := s.roll(); err != nil {
			return err
		}
	}
	return g.stageEntries()
}

// stageEntries copies the group's entries into a block-aligned staging buffer, zero-padded to a whole
// block, for the completer to write at the group's aligned start (flushStaged).
func (g *Group) stageEntries() error {
	s := g.s
	g.seg = s.active
	g.start = g.seg.size
	n := 0
	for i := range g.index {
		n += segEntryHeader + int(g.index[i].length)
	}
	if n == 0 {
		// Nothing to write (every append was a duplicate or refused): the group only orders
		// its answers and its metadata behind the groups before it. It is not staged: a
		// staged group must stay unreleased until a flush has written it, and this one's
		// wait does not flush.
		g.end = g.start
		g.empty = true
		return nil
	}
	padded := int(alignUp(int64(n)))
	g.box = s.getStage(padded)
	buf := g.box.b[:padded]
	w := 0
	for i := range g.index {
		w += copy(buf[w:], g.headers[segEntryHeader*i:segEntryHeader*(i+1)])
		g.index[i].pos = g.start + int64(w)
		w += copy(buf[w:], g.batches[i])
	}
	clear(buf[w:])
	g.stage = buf
	g.end = g.start + int64(n)
	g.seg.size = g.start + int64(padded)
	s.stagedMu.Lock()
	s.staged = append(s.staged, g)
	s.stagedMu.Unlock()
	return nil
}

// flushStaged writes every staged group in apply order and syncs each segment they touched
// once: under light load many small groups share one fdatasync instead of paying one each.
// Groups are written only here, by the completer, so they reach the file in order and every
// write follows the previous sync of its segment's earlier groups.
func (s *Store) flushStaged() error {
	s.stagedMu.Lock()
	batch := append(s.flushing[:0], s.staged...)
	clear(s.staged)
	s.staged = s.staged[:0]
	s.stagedMu.Unlock()
	s.flushing = batch
	for i := 0; i < len(batch); {
		// The groups of one segment are adjacent in the file: write them with one pwritev
		// (a direct write's CPU cost is mostly per call), then sync the segment.
		j := i + 1
		for j < len(batch) && batch[j].seg == batch[i].seg {
			j++
		}
		if err := s.writeStaged(batch[i:j]); err != nil {
			return err
		}
		seg := batch[i].seg
		if err := s.fdatasync(seg); err != nil {
			return err
		}
		i = j
	}
	for _, g := range batch {
		g.durable = true
		if s.tail != nil {
			// The cache takes the buffer over: release will not recycle it.
			s.evicted = s.tail.add(g.seg.id, g.start, g.stage, g.box, s.evicted[:0])
			g.stage, g.box = nil, nil
			for _, b := range s.evicted {
				s.putStage(b)
			}
			clear(s.evicted)
		}
	}
	clear(s.flushing)
	return nil
}

// fdatasync makes seg's written data durable, timed for the observer.
func (s *Store) fdatasync(seg *segment) error {
	var began time.Time
	if s.obs != nil {
		began = time.Now()
	}
	if err := seg.f.Datasync(); err != nil {
		return fmt.Errorf("batchlog: sync segment %d: %w", seg.id, &syncFailed{err})
	}
	if s.obs != nil {
		s.obs.Synced(time.Since(began))
	}
	return nil
}

// stageSize is the size of a new staging buffer for n bytes: the next power of two.
func stageSize(n int) int {
	size := blockSize
	for size < n {
		size <<= 1
	}
	return size
}

// stageBuf is a staging buffer (its whole capacity) in the box that carries it through the
// pool and the tail cache, so that handing it back allocates nothing.
type stageBuf struct{ b []byte }

// stageClasses: staging buffers are powers of two from blockSize to 1 GiB (a group larger
// than that gets a buffer of its own, never pooled).
const stageClasses = 19

// stageClass is the pool of a buffer of size bytes (a power of two, at least blockSize).
func stageClass(size int) int { return bits.TrailingZeros(uint(size / blockSize)) }

// getStage returns a staging buffer of at least n bytes, from the pool of its size.
func (s *Store) getStage(n int) *stageBuf {
	size := stageSize(n)
	if c := stageClass(size); c < stageClasses {
		if box, _ := s.stages[c].Get().(*stageBuf); box != nil {
			return box
		}
	}
	return &stageBuf{b: segfs.AlignedBuffer(size)}
}

// putStage hands a staging buffer back to the pool of its size.
func (s *Store) putStage(box *stageBuf) {
	if c := stageClass(cap(box.b)); c < stageClasses {
		s.stages[c].Put(box)
	}
}

// writeStaged writes staged groups of one segment, adjacent in the file and in order: with
// the segment's O_DIRECT writer, which it closes after the segment's last group, or through
// the page cache where there is none.
func (s *Store) writeStaged(groups []*Group) error {
	seg := groups[0].seg
	w := seg.f
	if d := seg.direct.Load(); d != nil {
		w = d.f
	} else if seg.usesDirect {
		panic("BUG: batchlog: direct writer closed before the segment's last group was written")
	}
	iov := s.iov[:0]
	end := groups[0].start
	for _, g := range groups {
		if g.start != end {
			panic("BUG: batchlog: staged groups of a segment are not adjacent")
		}
		iov = append(iov, g.stage)
		end += int64(len(g.stage))
	}
	s.iov = iov
	// A short direct write ends on a block boundary (O_DIRECT transfers whole blocks), so it
	// continues at an aligned address inside the next stage.
	if _, err := w.WriteV(iov, groups[0].start); err != nil {
		return fmt.Errorf("batchlog: write segment %d: %w", seg.id, &writeFailed{err})
	}
	clear(s.iov)
	seg.directEnd.Store(end)
	if end == seg.final.Load() {
		seg.closeWriter()
	}
	return nil
}

// Wait makes the group durable (one flush writes every group staged before it and syncs each
// segment once, so a group an earlier flush covered is not written again) and then applies
// its index and metadata to Pebble, unsynced: the segment is the log; Pebble is rebuilt from
// it.
func (g *Group) Wait() error {
	if g.empty {
		// Every group before it is durable (the completer waits in order), and it adds
		// nothing, so its checkpoint (its start) is durable too.
		return g.commitIndex()
	}
	if !g.durable {
		if err := g.s.flushStaged(); err != nil {
			return err
		}
	}
	if !g.durable {
		panic("BUG: batchlog: a staged group was not among the groups flushed after it")
	}
	return g.commitIndex()
}

// commitIndex applies the group's index entries, metadata and checkpoint to Pebble, unsynced:
// the segment is the log; Pebble is rebuilt from it.
func (g *Group) commitIndex() error {
	var k [DataKeyLen]byte
	var v [LocLen]byte
	for _, e := range g.index {
		PutDataKey(k[:], e.partition, e.base)
		_ = g.meta.Set(k[:], AppendLoc(v[:0], Loc{Seg: g.seg.id, Pos: e.pos, Length: int(e.length)}), nil)
	}
	if g.seg != nil && g.metadata {
		_ = g.meta.Set(CheckpointKey, AppendCheckpoint(v[:0], g.seg.id, g.end), nil)
	}
	if err := g.meta.Commit(pebble.NoSync); err != nil {
		return err
	}
	// The recent index learns the entries once Pebble holds them, before the high watermark
	// that lets readers at them moves.
	for _, p := range g.dropped {
		g.s.recent.forget(p)
	}
	for _, e := range g.index {
		g.s.recent.add(e.partition, e.base, Loc{Seg: g.seg.id, Pos: e.pos, Length: int(e.length)}, e.relocated)
	}
	return nil
}

// Release recycles the group and its staging buffer, unless the tail cache took it.
func (g *Group) Release() {
	_ = g.meta.Close()
	g.meta = nil
	if g.box != nil {
		g.s.putStage(g.box)
		g.stage, g.box = nil, nil
	}
	clear(g.batches) // drop references to request buffers
	select {
	case g.s.free <- g:
	default:
	}
}

// Close closes the segment files; the database is the catalog's (the log closes it after).
func (s *Store) Close() error {
	s.cold.stop()
	return s.closeFiles()
}

func (s *Store) closeFiles() error {
	var first error
	for _, seg := range s.segs {
		seg.closeWriter()
		if err := seg.f.Close(); err != nil && first == nil {
			first = err
		}
		if seg.rd != nil {
			seg.rd.Close()
		}
	}
	return first
}

// syncFailed wraps an fdatasync error: never retried, never taken for a full disk.
type syncFailed struct{ err error }

func (e *syncFailed) Error() string { return e.err.Error() }
func (e *syncFailed) Unwrap() error { return e.err }

// writeFailed wraps the error of a segment file write or creation: the only errors that can
// mean a full disk here (Pebble's own, and syncs, never do).
type writeFailed struct{ err error }

func (e *writeFailed) Error() string { return e.err.Error() }
func (e *writeFailed) Unwrap() error { return e.err }

// IsNoSpace reports whether err is a segment write (or creation) that found the disk full. A
// failed fdatasync never is, whatever its errno: after one the kernel may have dropped the
// dirty pages, so what is on disk is unknown.
func IsNoSpace(err error) bool {
	var wf *writeFailed
	if !errors.As(err, &wf) {
		return false
	}
	return errors.Is(wf.err, syscall.ENOSPC) || errors.Is(wf.err, syscall.EDQUOT)
}

// DropUnwritten forgets the groups staged and not written: suspended writes never resume
// with them.
func (s *Store) DropUnwritten() {
	s.stagedMu.Lock()
	clear(s.staged)
	s.staged = s.staged[:0]
	s.stagedMu.Unlock()
}

// ResetAfterFailure makes the store's view of its files what is on disk, for a Replay: after
// a full disk, with the completer idle.
func (s *Store) ResetAfterFailure() error {
	s.DropUnwritten()
	if s.tail != nil {
		s.tail.reset()
	}
	s.recent.forgetAll()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, seg := range s.segs {
		n, err := seg.f.Size()
		if err != nil {
			return err
		}
		seg.size = n
	}
	return nil
}

// FreeBytes is the free space of the segments' file system.
func (s *Store) FreeBytes() (int64, error) { return s.fs.FreeBytes(s.dir) }

// ForgetRecent drops partition's entries from the recent index (recent.go): its batches were
// dropped or its log start moved, so the index in Pebble is the one to read.
func (s *Store) ForgetRecent(partition uint32) { s.recent.forget(partition) }

// Stats is the segment files' state as it is now.
type Stats struct {
	Files int   // segment files, the active one included
	Bytes int64 // their sizes (block-aligned groups included)
	// CacheHits and CacheMisses count the batch reads the tail cache served and those that
	// went to the files; CacheBytes is what it holds now.
	CacheHits, CacheMisses, CacheBytes int64
}

// Stats stats every segment file: a scrape's cost, not a request's.
func (s *Store) Stats() Stats {
	var st Stats
	if s.tail != nil {
		st.CacheHits, st.CacheMisses = s.tail.hits.Load(), s.tail.misses.Load()
		s.tail.mu.RLock()
		st.CacheBytes = int64(s.tail.bytes)
		s.tail.mu.RUnlock()
	}
	// Under the read lock every segment in the map is open: DeleteBelow takes a segment out
	// of the map before it unlinks it, and closes it only later.
	s.mu.RLock()
	for _, seg := range s.segs {
		st.Files++
		if n, err := seg.f.Size(); err == nil {
			st.Bytes += n
		}
	}
	s.mu.RUnlock()
	return st
}

// WritesDirect reports whether the active segment is written with O_DIRECT (the file system
// took an O_DIRECT writer and Config.Buffered is not set). Read it while nothing is written.
func (s *Store) WritesDirect() bool { return s.active != nil && s.active.direct.Load() != nil }

// SetSegmentBytes changes the size at which the next segment file is started. Call it while
// nothing is written: the committer reads it unlocked.
func (s *Store) SetSegmentBytes(n int64) { s.segBytes = n }
