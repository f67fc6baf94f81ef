package diskless

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/idem"
	"inlet/objstore"
	"inlet/wire"
)

// Checkpoints: what keeps the commit log short. Without them every commit object stays in the
// bucket forever, and every start reads every one of them.
//
// The remote tier (package tier) uploads diskless partitions as it uploads tiered ones, from the
// local log up to the high watermark, which for a diskless partition only moves once its batches
// are in a commit object: the tier holds a prefix of what the commit log holds. Once every batch
// of commit objects 1..n is below its partition's uploaded end (or below its log start: deleted),
// those objects carry nothing the tier does not, except the state they imply: the group offsets,
// transactional ids, tenants and broker configs of their state entries, and each partition's
// producer windows and aborted transactions. A checkpoint, CheckpointKey(n), holds that state,
// folded; once it has landed, objects 1..n and older checkpoints are deleted.
//
// The fold is kept by the committer as objects land, in order (foldLanded, from the commit loop;
// Recover folds what it replays and uploads), so a checkpoint costs no read of the bucket. It is
// always as of the last landed object, L, which is n or later: a checkpoint written at n says
// "objects 1..n are folded here, and so are n+1..L". A restore seeds its fold from it, replays
// the batches of objects n+1..L without folding them again, and replays and folds the objects
// after L (folding is by object, and object L is in the valid log, so nothing is folded twice).
//
// A checkpoint is a commit object in form (header, entries, CRC; Decode reads it) whose header
// names n (Sequence; After is n-1) and the writer's epoch, holding:
//
//	StateCheckpoint  L u64 (the last object folded in), written unix ms i64
//	StateGroupOffsets..StateGroupRecords  the state fold re-emitted as the entries a log
//	                 holds: per group a deletion if it was deleted, one commit of its live
//	                 offsets, one deletion of those deleted, its records' writes merged into one;
//	                 the end of the last block of producer ids; per transactional id its record
//	                 or its deletion; the last tenants state; each level's broker configs
//	StatePartition   per diskless partition: topic id [16], partition i32, log start i64, end as
//	                 of n i64, end as of L i64, window count u32, then per window producer id
//	                 i64, length u16, idem.State encoding; aborted count u32, then per aborted
//	                 transaction producer id i64, first offset i64, marker offset i64
//
// Windows idle for more than ProducerIDExpiration (and not in a transaction) are dropped as a
// checkpoint is made, and at most batchlog.DefaultMaxProducerWindows are kept (the most recently
// written), as a node keeps them; aborted transactions wholly below the log start go, and so do
// the deletions of groups, offsets and transactional ids that the last checkpoint carried
// (groupsFold.dropCarried says why that is safe).
//
// Validity (Recover, chooseCheckpoint): a checkpoint is used only if the objects after it are
// numbered n+1, n+2, ... and form a log that continues it: no object after n names an object
// before n as the one it follows (that would void objects the checkpoint folded), and object L,
// when L > n, is in that log. A checkpoint a writer PUT after it lost the prefix folds objects the
// next writer voided (its first object names an earlier After), so it fails the test and an
// older one is used. Checkpoints and deletions are made only while writer() holds, as PUTs are.

// DefaultCheckpointInterval is Config.CheckpointInterval's default: what a restore replays past
// the last checkpoint is what landed since the tier's uploaded end of the checkpoint's time, so
// the interval adds to the restore's reads one-for-one; a checkpoint costs a PUT of the fold
// (about 130 bytes per producer window: 13 MB at 100,000) and the deletion of the objects it
// covers. 10 s keeps that under 2 MB/s at the bound of windows and keeps the interval's share of
// a restore's replay to 100 objects at the default commit interval.
const DefaultCheckpointInterval = 10 * time.Second

// FoldMemoryBound is what the checkpoints hold in memory at most, beside the log (what
// --memory-limit auto counts for them): the fold of batchlog.DefaultMaxProducerWindows windows
// of five batches (about 180 bytes each) and a checkpoint of them being encoded (about 130
// bytes a window): 31.5 MB measured by TestFoldFitsItsMemoryBound, which checks the bound.
const FoldMemoryBound = 48 << 20

// ProducerIDExpiration is Kafka's producer.id.expiration.ms default (one day): a window idle
// that long is dropped from the next checkpoint.
const ProducerIDExpiration = 24 * time.Hour

// CheckpointPrefix holds the checkpoints: CheckpointKey(n), n the last commit object folded.
const CheckpointPrefix = "diskless/checkpoint/"

// CheckpointKey is the key of the checkpoint of objects 1..n.
func CheckpointKey(n uint64) string { return fmt.Sprintf("%s%020d", CheckpointPrefix, n) }

// partRef names a partition in the bucket: its topic's id and its index.
type partRef struct {
	topic [16]byte
	index int32
}

// partFold is what the fold keeps of one diskless partition.
type partFold struct {
	windows map[int64]*idem.State
	aborted []batchlog.AbortedTxn // by marker offset
	logStart,
	endN, // the end of its batches in the objects up to the last checkpoint's n
	end int64 // the end of its batches folded
}

// checkpointer is the committer's fold and the state of its checkpoints. mu is a leaf.
type checkpointer struct {
	mu      sync.Mutex
	state   *stateFold
	parts   map[partRef]*partFold
	through uint64          // L: the last object folded
	landed  []landedObject  // objects folded and not yet in a checkpoint's 1..n, in order
	last    uint64          // n of the last checkpoint (written or read); 0: none
	carried uint64          // the state entries folded when the last checkpoint was made (stateFold.at)
	first   uint64          // the lowest commit object that may still be in the bucket
	on      bool            // checkpoints are written: the commit loop folds what lands
	wg      sync.WaitGroup  // the loop
	stats   CheckpointStats // under mu
}

// CheckpointStats say what the checkpoints did.
type CheckpointStats struct {
	Written        int    // checkpoints PUT
	Last           uint64 // n of the newest
	LastBytes      int    // its size
	DeletedObjects int    // commit objects deleted after checkpoints
	Windows        int    // producer windows in the newest
}

type landedObject struct {
	seq  uint64
	ends map[partRef]int64
}

func newFold() *stateFold { return &stateFold{groups: groupsFold{}, txns: txnFold{}} }

func (k *checkpointer) init() {
	if k.state == nil {
		k.state, k.parts = newFold(), map[partRef]*partFold{}
	}
}

func (k *checkpointer) part(r partRef) *partFold {
	f := k.parts[r]
	if f == nil {
		f = &partFold{windows: map[int64]*idem.State{}}
		k.parts[r] = f
	}
	return f
}

// CheckpointStats reads the checkpoints' counters.
func (c *Committer) CheckpointStats() CheckpointStats {
	c.ck.mu.Lock()
	defer c.ck.mu.Unlock()
	return c.ck.stats
}

// foldLanded folds commit object seq (its entries as PUT, object.entryList) in: the commit
// loop calls it once the object has landed, in number order, before its groups are published;
// Recover for the objects it writes.
func (c *Committer) foldLanded(seq uint64, entries []Entry) {
	if !c.ck.on {
		return
	}
	err := c.fold(seq, entries, true, time.Now().UnixMilli())
	if err != nil { // never: the committer wrote it
		c.cfg.Logger.Error("diskless: a landed commit object does not fold; checkpoints stop", "seq", seq, "err", err)
		c.ck.mu.Lock()
		c.ck.landed = append(c.ck.landed, landedObject{seq: seq, ends: map[partRef]int64{{}: -1}}) // never covered
		c.ck.mu.Unlock()
	}
}

// fold adds object seq's entries to the fold (unless apply is false: an object a checkpoint
// folded already), the batches' windows written at nowMs, and notes the ends of its
// partitions' batches for the next checkpoint.
func (c *Committer) fold(seq uint64, entries []Entry, apply bool, nowMs int64) error {
	k := &c.ck
	k.mu.Lock()
	defer k.mu.Unlock()
	k.init()
	ends := map[partRef]int64{}
	for _, e := range entries {
		if e.State != nil && !apply {
			continue
		}
		if e.State != nil {
			kind := -e.Partition
			switch {
			case !format.LogKind(kind):
				return fmt.Errorf("diskless: object %d: state entry of kind %d in a commit object", seq, kind)
			case kind == StateLogStart:
				r, start, err := decodeLogStart(e.State)
				if err != nil {
					return fmt.Errorf("diskless: object %d: %w", seq, err)
				}
				f := k.part(r)
				f.logStart = max(f.logStart, start)
			default:
				if err := k.state.add(kind, e.State); err != nil {
					return fmt.Errorf("diskless: object %d: %w", seq, err)
				}
			}
			continue
		}
		r := partRef{e.TopicID, e.Partition}
		bh, err := wire.ParseBatchHeader(e.Batch)
		if err != nil {
			return err
		}
		end := e.Base + int64(bh.LastOffsetDelta) + 1
		if apply {
			foldBatch(k.part(r), e.Base, bh, e.Batch, nowMs)
		}
		ends[r] = max(ends[r], end)
	}
	k.through = max(k.through, seq)
	k.landed = append(k.landed, landedObject{seq: seq, ends: ends})
	return nil
}

// foldBatch folds a batch at base into f as the log's committer builds windows (batchlog's
// commitAppend and commitMarker) and returns its end.
func foldBatch(f *partFold, base int64, bh wire.BatchHeader, batch []byte, nowMs int64) int64 {
	end := base + int64(bh.LastOffsetDelta) + 1
	f.end = max(f.end, end)
	if bh.ProducerID < 0 {
		return end
	}
	w := f.windows[bh.ProducerID]
	if bh.IsControl() {
		if w == nil || w.TxnFirstOffset < 0 {
			return end // the log writes no marker then
		}
		first := w.TxnFirstOffset
		w.EndTxn(bh.ProducerEpoch)
		w.LastWrite = nowMs
		if kind, err := wire.ControlBatchType(batch); err == nil && kind == wire.ControlAbort {
			f.aborted = append(f.aborted, batchlog.AbortedTxn{ProducerID: bh.ProducerID, FirstOffset: first, LastOffset: base, LastStable: -1})
		}
		return end
	}
	if w == nil {
		s := idem.NewState()
		w = &s
		f.windows[bh.ProducerID] = w
	}
	w.Push(bh.ProducerEpoch, bh.BaseSequence, bh.NumRecords, base)
	w.LastWrite = nowMs
	if bh.IsTransactional() && w.TxnFirstOffset < 0 {
		w.TxnFirstOffset = base
	}
	return end
}

// prune drops the windows idle since before nowMs-ProducerIDExpiration (those in a transaction
// stay), then the least recently written beyond max, and the aborted transactions and windows
// of partitions that are gone (live false).
func (k *checkpointer) prune(nowMs int64, bound int, live func(partRef) (logStart int64, ok bool)) {
	cutoff := nowMs - ProducerIDExpiration.Milliseconds()
	type aged struct {
		w   map[int64]*idem.State
		pid int64
		at  int64
	}
	var all []aged
	for r, f := range k.parts {
		ls, ok := live(r)
		if !ok {
			delete(k.parts, r)
			continue
		}
		f.logStart = max(f.logStart, ls)
		i := sort.Search(len(f.aborted), func(i int) bool { return f.aborted[i].LastOffset >= f.logStart })
		f.aborted = f.aborted[i:]
		for pid, w := range f.windows {
			switch {
			case w.TxnFirstOffset >= 0:
			case w.LastWrite < cutoff:
				delete(f.windows, pid)
			default:
				all = append(all, aged{f.windows, pid, w.LastWrite})
			}
		}
	}
	if len(all) > bound {
		slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.at, b.at) })
		for _, a := range all[:len(all)-bound] {
			delete(a.w, a.pid)
		}
	}
}

// encodePart appends f's StatePartition payload.
func encodePart(b []byte, r partRef, f *partFold) []byte {
	b = append(b, r.topic[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.index))
	b = binary.BigEndian.AppendUint64(b, uint64(f.logStart))
	b = binary.BigEndian.AppendUint64(b, uint64(f.endN))
	b = binary.BigEndian.AppendUint64(b, uint64(f.end))
	pids := make([]int64, 0, len(f.windows))
	for pid := range f.windows {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	b = binary.BigEndian.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		at := len(b)
		b = f.windows[pid].AppendBinary(binary.BigEndian.AppendUint16(b, 0))
		binary.BigEndian.PutUint16(b[at:], uint16(len(b)-at-2))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.aborted)))
	for _, a := range f.aborted {
		b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	}
	return b
}

var errBadPart = errors.New("diskless: not a checkpoint's partition entry")

// decodePart reads what encodePart writes, all of b and nothing else.
func decodePart(b []byte) (partRef, *partFold, error) {
	var r partRef
	rd := stateReader{b: b, ok: true}
	copy(r.topic[:], rd.bytes(16))
	r.index = int32(rd.u32())
	f := &partFold{windows: map[int64]*idem.State{}}
	f.logStart, f.endN, f.end = int64(rd.u64()), int64(rd.u64()), int64(rd.u64())
	n := rd.u32()
	if !rd.ok || uint64(n) > uint64(len(rd.b))/10 || r.index < 0 {
		return r, nil, errBadPart
	}
	for i := uint32(0); i < n && rd.ok; i++ {
		pid := int64(rd.u64())
		sb := rd.bytes(int(rd.u16()))
		st := idem.NewState()
		if !rd.ok || st.UnmarshalBinary(sb) != nil {
			return r, nil, errBadPart
		}
		f.windows[pid] = &st
	}
	n = rd.u32()
	if !rd.ok || uint64(n) > uint64(len(rd.b))/24 {
		return r, nil, errBadPart
	}
	for i := uint32(0); i < n && rd.ok; i++ {
		f.aborted = append(f.aborted, batchlog.AbortedTxn{ProducerID: int64(rd.u64()), FirstOffset: int64(rd.u64()),
			LastOffset: int64(rd.u64()), LastStable: -1})
	}
	if !rd.ok || len(rd.b) != 0 {
		return r, nil, errBadPart
	}
	return r, f, nil
}

func (r *stateReader) u16() uint16 {
	if v := r.bytes(2); r.ok {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

// stateEntries appends the state fold's entries to obj (newObject's), returning it and their
// count: folded again, they give the fold back.
func (f *stateFold) entries(obj []byte) ([]byte, uint32, error) {
	var n uint32
	add := func(kind int32, payload []byte) {
		obj = format.AppendState(obj, kind, payload)
		n++
	}
	names := make([]string, 0, len(f.groups))
	for name := range f.groups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		g := f.groups[name]
		if g.cleared {
			add(StateGroupOffsets, encodeGroupOp(nil, groupOp{Op: opDeleteGroup, Group: name}))
		}
		live, gone := groupOp{Op: opCommit, Group: name}, groupOp{Op: opDeleteOffsets, Group: name}
		for k, o := range g.offsets {
			if o == nil {
				gone.Offsets = append(gone.Offsets, groupOffset{Topic: k.Topic, Partition: k.Partition})
			} else {
				live.Offsets = append(live.Offsets, groupOffset{Topic: k.Topic, Partition: k.Partition, Offset: o.Offset,
					LeaderEpoch: o.LeaderEpoch, CommitTime: o.CommitTime, Metadata: o.Metadata})
			}
		}
		for _, op := range []groupOp{live, gone} {
			if len(op.Offsets) > 0 {
				sortOffsets(op.Offsets)
				add(StateGroupOffsets, encodeGroupOp(nil, op))
			}
		}
		if g.records != nil { // after the deletion, which drops the records before it
			v, err := json.Marshal(g.records)
			if err != nil {
				return obj, n, err
			}
			add(StateGroupRecords, append(appendString16(nil, name), v...))
		}
	}
	if f.pidEnd > 0 {
		add(StateProducerIDs, binary.BigEndian.AppendUint64(nil, uint64(f.pidEnd)))
	}
	ids := make([]string, 0, len(f.txns))
	for id := range f.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if v := f.txns[id].record; v == nil {
			add(StateTxn, encodeTxnOp(opTxnDelete, id, nil))
		} else {
			add(StateTxn, encodeTxnOp(opTxnSave, id, v))
		}
	}
	if f.tenants != nil {
		b, err := json.Marshal(f.tenants)
		if err != nil {
			return obj, n, err
		}
		add(StateTenants, b)
	}
	for level, set := range f.set {
		if set {
			b, err := json.Marshal(f.brokers[level])
			if err != nil {
				return obj, n, err
			}
			add(StateBrokerConfigs, append([]byte{byte(level)}, b...))
		}
	}
	return obj, n, nil
}

// checkpointFold is a checkpoint read back: its n and L, the state fold and the partitions.
type checkpointFold struct {
	key     string
	h       Header
	through uint64
	state   *stateFold
	parts   map[partRef]*partFold
}

// decodeCheckpoint reads checkpoint n's bytes.
func decodeCheckpoint(key string, n uint64, b []byte) (*checkpointFold, error) {
	h, entries, err := Decode(b)
	if err != nil {
		return nil, err
	}
	if h.Sequence != n || len(entries) == 0 || entries[0].Partition != -StateCheckpoint || len(entries[0].State) != 16 {
		return nil, fmt.Errorf("diskless: %s is not checkpoint %d", key, n)
	}
	ck := &checkpointFold{key: key, h: h, through: binary.BigEndian.Uint64(entries[0].State), state: newFold(), parts: map[partRef]*partFold{}}
	if ck.through < n {
		return nil, fmt.Errorf("diskless: %s folds up to object %d, before %d", key, ck.through, n)
	}
	for _, e := range entries[1:] {
		switch kind := -e.Partition; {
		case e.State == nil || kind == StateCheckpoint:
			return nil, fmt.Errorf("diskless: %s: an entry not of a checkpoint", key)
		case kind == StatePartition:
			r, f, err := decodePart(e.State)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			ck.parts[r] = f
		default:
			if err := ck.state.add(kind, e.State); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return ck, nil
}

// seed makes ck the committer's fold (Recover, before it replays the objects after it).
func (k *checkpointer) seed(ck *checkpointFold) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.state, k.parts, k.through, k.last = ck.state, ck.parts, ck.through, ck.h.Sequence
	k.carried = ck.state.at
}

// covered is the n a checkpoint may be written at now: the last landed object up to which
// every batch of every diskless partition is below the tier's uploaded end or the log start
// (0: none past the last checkpoint). Called holding mu.
func (c *Committer) covered(live map[partRef]*batchlog.Partition) uint64 {
	n := uint64(0)
	for _, o := range c.ck.landed {
		for r, end := range o.ends {
			p := live[r]
			if p != nil && end > max(c.cfg.UploadedEnd(p), p.LogStartOffset()) || p == nil && end < 0 {
				return n
			}
		}
		n = o.seq
	}
	return n
}

// liveParts maps the log's diskless partitions by their name in the bucket.
func liveParts(l *batchlog.Log) map[partRef]*batchlog.Partition {
	out := map[partRef]*batchlog.Partition{}
	for _, t := range l.Topics() {
		if t.Settings.Diskless {
			for _, p := range t.Partitions {
				out[partRef{t.ID, p.Index}] = p
			}
		}
	}
	return out
}

// Checkpoint writes a checkpoint at the highest n the tier covers, if past the last one, and
// then deletes the commit objects up to n and the older checkpoints. It returns n (0: none
// written). The loop calls it every CheckpointInterval; tests call it directly.
func (c *Committer) Checkpoint(ctx context.Context) (uint64, error) {
	if !c.ck.on || c.log == nil {
		return 0, nil
	}
	if err := c.writer(); err != nil {
		return 0, err
	}
	live := liveParts(c.log)
	now := time.Now()
	k := &c.ck
	k.mu.Lock()
	k.init()
	n := c.covered(live)
	if n <= k.last {
		k.mu.Unlock()
		return 0, nil
	}
	k.prune(now.UnixMilli(), batchlog.DefaultMaxProducerWindows, func(r partRef) (int64, bool) {
		p := live[r]
		if p == nil {
			return 0, false
		}
		return p.LogStartOffset(), true
	})
	endN := map[partRef]int64{}
	for _, o := range k.landed {
		if o.seq > n {
			break
		}
		for r, end := range o.ends {
			endN[r] = max(endN[r], end)
		}
	}
	// The deletions the last checkpoint carried go (stateFold.dropCarried); this one carries
	// those folded since.
	k.state.dropCarried(k.carried)
	carrying := k.state.at
	obj := format.NewObject(nil)
	head := binary.BigEndian.AppendUint64(nil, k.through)
	obj = format.AppendState(obj, StateCheckpoint, binary.BigEndian.AppendUint64(head, uint64(now.UnixMilli())))
	obj, entries, err := k.state.entries(obj)
	entries++
	refs := make([]partRef, 0, len(k.parts))
	for r := range k.parts {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b partRef) int {
		if c := bytes.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return int(a.index - b.index)
	})
	windows := 0
	var part []byte
	for _, r := range refs {
		f := *k.parts[r]
		f.endN = max(f.endN, endN[r])
		windows += len(f.windows)
		part = encodePart(part[:0], r, &f)
		obj = format.AppendState(obj, StatePartition, part)
		entries++
	}
	k.mu.Unlock()
	if err != nil {
		return 0, err
	}
	var epoch uint64
	if c.cfg.Epoch != nil {
		epoch = c.cfg.Epoch()
	}
	body := format.Seal(obj, Header{Epoch: epoch, Incarnation: c.incarnation, Sequence: n, Node: c.cfg.NodeID, Entries: entries, After: n - 1})
	key := CheckpointKey(n)
	if err := c.writer(); err != nil {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	err = c.cfg.Bucket.Put(pctx, key, bytes.NewReader(body), int64(len(body)))
	if errors.Is(err, objstore.ErrExists) {
		var own bool
		if own, err = isOwn(pctx, c.cfg.Bucket, key, objstore.NewBuffers([][]byte{body})); err == nil && !own {
			err = fmt.Errorf("diskless: %s was written by another writer", key)
		}
	}
	cancel()
	if err != nil {
		return 0, err
	}
	k.mu.Lock()
	for r, end := range endN {
		if f := k.parts[r]; f != nil {
			f.endN = max(f.endN, end)
		}
	}
	i := 0
	for i < len(k.landed) && k.landed[i].seq <= n {
		i++
	}
	k.landed = slices.Delete(k.landed, 0, i)
	k.last = n
	k.carried = max(k.carried, carrying)
	first := k.first
	k.stats.Written++
	k.stats.Last, k.stats.LastBytes, k.stats.Windows = n, len(body), windows
	k.mu.Unlock()
	// Landed; the objects it covers go, oldest first, then the older checkpoints. A crash
	// between leaves objects <= n that Recover ignores and the next checkpoint deletes.
	start := max(first, 1)
	deleted, err := c.deleteCovered(ctx, start, n)
	k.mu.Lock()
	k.stats.DeletedObjects += deleted
	k.first = max(k.first, start+uint64(deleted))
	k.mu.Unlock()
	return n, err
}

// deleteCovered deletes commit objects first..n and the checkpoints before n, each only while
// this node is the writer; it returns how many commit objects went.
func (c *Committer) deleteCovered(ctx context.Context, first, n uint64) (int, error) {
	deleted := 0
	del := func(key string) error {
		if err := c.writer(); err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
		if err := c.cfg.Bucket.Delete(dctx, key); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return err
		}
		return nil
	}
	for s := first; s <= n; s++ {
		if err := del(LogKey(s)); err != nil {
			return deleted, err
		}
		deleted++
	}
	var old []string
	lctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	err := c.cfg.Bucket.List(lctx, CheckpointPrefix, func(key string, _ int64) error {
		if m, ok := ParseNumbered(CheckpointPrefix, key); ok && m < n {
			old = append(old, key)
		}
		return nil
	})
	cancel()
	for _, key := range old {
		if err == nil {
			err = del(key)
		}
	}
	return deleted, err
}

// checkpointLoop writes a checkpoint every CheckpointInterval until the committer stops.
func (c *Committer) checkpointLoop() {
	defer c.ck.wg.Done()
	t := time.NewTicker(c.cfg.CheckpointInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-c.stop
		cancel()
	}()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if c.fenced.Load() {
			return
		}
		if _, err := c.Checkpoint(ctx); err != nil && !errors.Is(err, errNotWriter) && ctx.Err() == nil {
			c.cfg.Logger.Warn("diskless: checkpoint not written; trying again at the next interval", "err", err)
		}
	}
}

// checkpointsOn says whether checkpoints are written (Recover asks first): a tier to cover
// objects, and an interval (the default for 0, none for a negative one). With none, the fold
// Recover made is dropped once it is applied, and landed folds nothing.
func (c *Committer) checkpointsOn() bool {
	if c.cfg.CheckpointInterval == 0 {
		c.cfg.CheckpointInterval = DefaultCheckpointInterval
	}
	c.ck.on = c.cfg.UploadedEnd != nil && c.cfg.CheckpointInterval > 0
	return c.ck.on
}

// startCheckpoints starts the checkpoint loop (with the commit loop) unless checkpoints are off.
func (c *Committer) startCheckpoints() {
	if c.ck.on {
		c.ck.wg.Add(1)
		go c.checkpointLoop()
	} else {
		c.ck.mu.Lock()
		c.ck.state, c.ck.parts, c.ck.landed = nil, nil, nil
		c.ck.mu.Unlock()
	}
}
