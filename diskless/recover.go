package diskless

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
	"sync"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/idem"
	"inlet/objstore"
	"inlet/tier"
	"inlet/wire"
)

// RecoverStats says what Recover did.
type RecoverStats struct {
	Objects  int // commit objects read
	Cached   int // of them, read from Config.Cache
	Replayed int // batches appended to the local log from them
	Uploaded int // local batches never in the bucket, PUT now
	Offsets  int // consumer group offsets written to the catalog from state entries (state.go)
	Txns     int // transactional ids' records written to the catalog (txn_state.go)
	// Checkpoint is the n of the checkpoint the fold began from (0: none; checkpoint.go).
	Checkpoint uint64
	Duration   time.Duration
}

// Recover brings the local log and the bucket's commit log together, then starts the commit
// loop. Run it after the log has opened (and after tier.Restore, which recreates the diskless
// topics from their descriptions, empty) and before the node serves:
//
//   - every commit object of the log is read in number order (the chain of objects each
//     naming the one it follows, from 1; the objects off it are void: a stale writer's, and
//     those past a gap that a writer stopped with PUTs in flight left, see the package
//     comment), and each batch of a diskless partition past the local high watermark is appended at its
//     offset (through the committer, as a produce: the producer windows are rebuilt from the
//     batches as replay rebuilds them); a batch that does not continue the partition exactly
//     stops the start with an error. After a restore on an empty disk that is every batch;
//     on the node's own disk, none, unless the disk lost synced data. Transactional batches
//     and markers are replayed too: the committer rebuilds the partitions' open
//     transactions, aborted index and last stable offsets from them (txn_state.go).
//   - each diskless partition's local batches above what the bucket holds (written and synced
//     here, but never PUT before the node stopped: never acknowledged either, or answered
//     REQUEST_TIMED_OUT) are PUT in new commit objects before anything is served, so that what
//     a reader may see from now on is in the bucket.
//   - each diskless topic's description is written if this run has not written it.
func (c *Committer) Recover(ctx context.Context, l *batchlog.Log) (RecoverStats, error) {
	var st RecoverStats
	began := time.Now()
	c.log = l
	c.checkpointsOn()
	objs, err := c.listNumbered(ctx, LogPrefix)
	if err != nil {
		return st, err
	}
	cks, err := c.listNumbered(ctx, CheckpointPrefix)
	if err != nil {
		return st, err
	}
	byID := map[[16]byte]*batchlog.Topic{}
	for _, t := range l.Topics() {
		if t.Settings.Diskless {
			byID[t.ID] = t
		}
	}
	hdrs := map[uint64]Header{}
	ck, log, err := c.chooseCheckpoint(ctx, objs, cks, hdrs)
	if err != nil {
		return st, err
	}
	// A partition rebuilt from the bucket (no batch of its own, no window) takes its producer
	// windows and aborted transactions from the fold, once its batches are replayed; one on
	// the node's own disk keeps its own. Its batches are appended as they are, not checked
	// against windows it does not have yet (an append of producer id -1).
	restored := map[*batchlog.Partition]bool{}
	ends := map[*batchlog.Partition]int64{}
	through := uint64(0)
	if ck != nil {
		through = ck.through
		c.ck.seed(ck)
		st.Checkpoint = ck.h.Sequence
	}
	c.ck.mu.Lock()
	c.ck.init()
	c.ck.mu.Unlock()
	for _, t := range byID {
		for _, p := range t.Partitions {
			if p.LocalLogStartOffset() != p.HighWatermark() {
				continue
			}
			if ws, err := l.Producers(p); err != nil || len(ws) > 0 {
				continue
			}
			restored[p] = true
			var f *partFold
			if ck != nil {
				f = ck.parts[partRef{t.ID, p.Index}]
			}
			if f != nil && f.endN > p.HighWatermark() {
				// The tier lacks the partition's batches below the checkpoint's objects
				// (retention deleted them): it restarts empty where those objects ended.
				if err := l.RestoreProducers(p, f.endN, nil, nil); err != nil {
					return st, err
				}
			}
		}
	}
	if ck != nil {
		for r, f := range ck.parts {
			if t := byID[r.topic]; t != nil && int(r.index) < len(t.Partitions) {
				ends[t.Partitions[r.index]] = f.end
			}
		}
	}
	maxPID := int64(-1)
	c.replaying.Store(true)
	rctx, stopReads := context.WithCancel(ctx)
	bodies, taken := c.readAhead(rctx, log, hdrs)
	for i, o := range log {
		r := <-bodies[i]
		if r.slot {
			taken()
		}
		if r.cached {
			st.Cached++
		}
		n, err := 0, r.err
		if err == nil {
			n, err = c.replayObject(l, o.key, r.body, o.n, o.n > through, byID, ends, restored, &maxPID)
		}
		if err != nil {
			stopReads()
			c.replaying.Store(false)
			return st, err
		}
		st.Objects++
		st.Replayed += n
	}
	stopReads()
	c.replaying.Store(false)
	for p := range restored {
		if err := c.restoreProducers(l, p, &maxPID); err != nil {
			return st, err
		}
	}
	fold := c.ck.state
	// The group changes of the log, folded, go to the catalog before the group coordinator
	// loads it (state.go); the last tenants state and broker configs over the node's, before
	// the admin APIs load them (node_state.go).
	if st.Offsets, err = fold.groups.apply(l.Meta(), func(topic string) bool { _, ok := l.Topic(topic); return ok }); err != nil {
		return st, fmt.Errorf("diskless: group offsets: %w", err)
	}
	if err := fold.apply(l); err != nil {
		return st, err
	}
	// The transactional ids' records, before the transaction coordinator loads them; an
	// Ongoing one the node did not hold is aborted when the coordinator starts.
	txnPID := int64(-1)
	if st.Txns, txnPID, err = fold.txns.apply(l.Meta()); err != nil {
		return st, fmt.Errorf("diskless: transactional ids: %w", err)
	}
	maxPID = max(maxPID, txnPID, fold.pidEnd-1)
	// The producer ids of the replayed windows were handed out by the node that wrote them, and
	// so may every id of the blocks it reserved: none may be handed out again (a new producer
	// would meet an old one's window, or share its id with a live one).
	if err := l.Meta().ReserveProducerIDsPast(maxPID); err != nil {
		return st, err
	}
	// The next object follows the log's last one; the numbers past it that objects hold (PUTs a
	// writer stopped with in flight, past a gap: void) are skipped, and an empty object naming
	// the log's last one is written first, before anything is served, so that they stay void if
	// a late PUT fills the gap before them.
	tail, last := uint64(0), uint64(0)
	if ck != nil {
		tail = ck.through
	}
	if len(log) > 0 {
		tail = max(tail, log[len(log)-1].n)
	}
	if len(objs) > 0 {
		last = objs[len(objs)-1].n
	}
	last = max(last, tail)
	if last-tail > 2*MaxPutsInFlightLimit {
		// More than a writer can leave in flight, twice over (a renumbering): a log that
		// lost objects.
		return st, fmt.Errorf("diskless: %d objects past the log's last (%s), more than a writer stopped with PUTs in flight leaves: the commit log lost objects", last-tail, LogKey(tail))
	}
	c.next, c.after = last+1, tail
	if last > tail {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(time.Minute)
		}
		o := &object{buf: format.NewObject(nil)}
		if !c.put(o, deadline) {
			return st, fmt.Errorf("diskless: writing the object that voids %s..%s failed", LogKey(tail+1), LogKey(last))
		}
		c.foldLanded(o.seq, o.entryList())
	}
	c.ck.mu.Lock()
	c.ck.first = c.next
	if len(objs) > 0 {
		c.ck.first = objs[0].n // those <= the checkpoint go with the next one
	}
	c.ck.mu.Unlock()
	for _, t := range byID {
		for _, p := range t.Partitions {
			n, err := c.uploadLocal(ctx, l, t, p, ends[p])
			st.Uploaded += n
			if err != nil {
				return st, err
			}
		}
		if err := c.describeRetrying(ctx, t); err != nil {
			return st, err
		}
	}
	if c.cfg.Cache != nil {
		c.cfg.Cache.Drop() // a writer now: the copy is not read again
	}
	st.Duration = time.Since(began)
	c.stats.RecoverObjects.Store(int64(st.Objects))
	c.stats.RecoverCached.Store(int64(st.Cached))
	c.stats.RecoverReplayed.Store(int64(st.Replayed))
	c.stats.RecoverUploaded.Store(int64(st.Uploaded))
	c.stats.RecoverNanos.Store(int64(st.Duration))
	c.start()
	return st, nil
}

// ObjectCache is a local copy of the commit log's objects (a standby's, kept while it follows
// the writer: diskless/follow). Recover reads an object from it in place of a GET, but trusts
// nothing it reads there: a copy is read only if it has the object's listed size; its header
// only if its magic and number read right; its bytes only if their CRC checks and their header
// is the one the log was chosen by (chain). Anything else is read from the bucket. A copy whose
// header passed but whose bytes then did not, and whose bucket object's header differs (a copy
// damaged in just those bytes), chose the log wrongly: Recover drops the copy and fails, and the
// next start reads the bucket.
type ObjectCache interface {
	// ReadAt fills dst from off in the copy of commit object n; false without a copy of
	// exactly size bytes, or if it does not read.
	ReadAt(n uint64, size, off int64, dst []byte) bool
	// Drop removes the copy: called once Recover is done with it.
	Drop()
}

type listed struct {
	key  string
	size int64
	n    uint64
}

// listNumbered lists the commit objects or checkpoints under prefix, by number.
func (c *Committer) listNumbered(ctx context.Context, prefix string) ([]listed, error) {
	var out []listed
	err := c.retrying(ctx, "listing "+prefix, func() error {
		out = out[:0]
		return c.cfg.Bucket.List(ctx, prefix, func(key string, size int64) error {
			if n, ok := ParseNumbered(prefix, key); ok {
				out = append(out, listed{key, size, n})
			}
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out, err
}

// chooseCheckpoint picks the newest checkpoint that reads and that the commit objects after it
// continue (checkpoint.go), and returns it with the log to replay after it: the objects past
// its n, each following the one its header names (After), so that an object a writer that had
// lost the prefix landed late is void (a stale object, skipped by the next writer), and so is
// one of an older epoch than an object before it. With no checkpoint (or none valid) the log
// must start at object 1. The objects after the checkpoint (or from 1) must be numbered
// without a gap.
func (c *Committer) chooseCheckpoint(ctx context.Context, objs, cks []listed, hdrs map[uint64]Header) (*checkpointFold, []listed, error) {
	for i := len(cks) - 1; i >= 0; i-- {
		k := cks[i]
		buf := make([]byte, k.size)
		if err := c.retrying(ctx, "reading "+k.key, func() error { return c.cfg.Bucket.ReadAt(ctx, k.key, 0, buf) }); err != nil {
			return nil, nil, fmt.Errorf("diskless: %s: %w", k.key, err)
		}
		ck, err := decodeCheckpoint(k.key, k.n, buf)
		if err != nil {
			c.cfg.Logger.Warn("diskless: checkpoint skipped: it does not read", "key", k.key, "err", err)
			continue
		}
		log, ok, err := c.chain(ctx, objs, k.n, ck.through, ck.h.Epoch, hdrs)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return ck, log, nil
		}
		c.cfg.Logger.Warn("diskless: checkpoint skipped: the commit log after it does not continue it (a stale writer's, or objects missing)", "key", k.key)
	}
	if len(objs) > 0 && objs[0].n != 1 {
		return nil, nil, fmt.Errorf("diskless: the commit log has no object 1 before %s, and no checkpoint of the objects before it", objs[0].key)
	}
	log, _, err := c.chain(ctx, objs, 0, 0, 0, hdrs)
	return nil, log, err
}

// chain is the log of the objects past n (objs by number; their headers read once into
// hdrs), and whether it continues a checkpoint at n that folded objects up to through at
// epoch: the first object after n is n+1, no object names one before n as the one it follows,
// and object through, if past n, is in the log and of an epoch no newer than the checkpoint's.
// An object is in the log if it follows the log's last object (or n, first): one that
// follows an object not in the log is void (past a gap a writer left when it stopped with
// PUTs in flight, which were never answered), and so is one of an older epoch than an object
// before it; one naming an earlier object than the log's last voids those after it (a stale
// writer's objects, landed late).
func (c *Committer) chain(ctx context.Context, objs []listed, n, through, epoch uint64, hdrs map[uint64]Header) ([]listed, bool, error) {
	i := sort.Search(len(objs), func(i int) bool { return objs[i].n > n })
	objs = objs[i:]
	if len(objs) > 0 && objs[0].n != n+1 {
		if n > 0 {
			return nil, false, nil // a gap after a checkpoint: maybe a newer one's deletions
		}
		return nil, false, fmt.Errorf("diskless: the commit log has no object %d before %s", n+1, objs[0].key)
	}
	var log []listed
	lastOf := func() uint64 {
		if len(log) == 0 {
			return n
		}
		return log[len(log)-1].n
	}
	floor, valid := uint64(0), true
	for _, o := range objs {
		h, ok := hdrs[o.n]
		if !ok {
			var hb [format.HeaderLen]byte
			cached := c.cfg.Cache != nil && c.cfg.Cache.ReadAt(o.n, o.size, 0, hb[:]) &&
				string(hb[:4]) == format.Magic && binary.BigEndian.Uint64(hb[24:]) == o.n
			if !cached {
				if err := c.retrying(ctx, "reading "+o.key, func() error { return c.cfg.Bucket.ReadAt(ctx, o.key, 0, hb[:]) }); err != nil {
					return nil, false, fmt.Errorf("diskless: %s: %w", o.key, err)
				}
			}
			h = Header{Epoch: binary.BigEndian.Uint64(hb[8:]), After: binary.BigEndian.Uint64(hb[40:])}
			if string(hb[:4]) != format.Magic {
				h.Epoch = 0 // never of the log: below every floor but the first
				h.After = ^uint64(0)
			}
			hdrs[o.n] = h
		}
		if h.After == ^uint64(0) || h.Epoch < floor {
			c.cfg.Logger.Warn("diskless: commit object skipped: not of the log's writers", "key", o.key, "epoch", h.Epoch)
			continue
		}
		for len(log) > 0 && log[len(log)-1].n > h.After {
			c.cfg.Logger.Warn("diskless: commit object void: a stale writer's", "key", log[len(log)-1].key)
			log = log[:len(log)-1]
		}
		if len(log) == 0 && h.After < n {
			valid = false // it voids objects the checkpoint folded
		}
		if lastOf() != h.After {
			c.cfg.Logger.Warn("diskless: commit object void: it follows an object not in the log", "key", o.key, "after", LogKey(h.After))
			continue
		}
		floor = h.Epoch
		log = append(log, o)
	}
	if through > n {
		j := sort.Search(len(log), func(j int) bool { return log[j].n >= through })
		valid = valid && j < len(log) && log[j].n == through && hdrs[through].Epoch <= epoch
	}
	return log, valid, nil
}

// restoreProducers gives a restored partition the fold's windows and aborted transactions, and
// the fold's log start (a DeleteRecords, or retention, before the checkpoint).
func (c *Committer) restoreProducers(l *batchlog.Log, p *batchlog.Partition, maxPID *int64) error {
	t, ok := l.Topic(p.Topic)
	if !ok {
		return nil
	}
	c.ck.mu.Lock()
	f := c.ck.parts[partRef{t.ID, p.Index}]
	var windows map[int64]idem.State
	var aborted []batchlog.AbortedTxn
	logStart := int64(0)
	if f != nil {
		windows = make(map[int64]idem.State, len(f.windows))
		for pid, w := range f.windows {
			windows[pid] = *w
			*maxPID = max(*maxPID, pid)
		}
		aborted, logStart = slices.Clone(f.aborted), f.logStart
	}
	c.ck.mu.Unlock()
	if err := l.RestoreProducers(p, 0, windows, aborted); err != nil {
		return err
	}
	if logStart > p.LogStartOffset() {
		if _, err := l.DeleteRecords(p, min(logStart, p.HighWatermark())); err != nil {
			return fmt.Errorf("diskless: restore the log start of %s/%d: %w", p.Topic, p.Index, err)
		}
	}
	return nil
}

// replayObject appends the batches of commit object seq that the local log lacks, and folds
// the object (when fold: it is past the checkpoint's L) or notes its ends (checkpoint.go).
// A restored partition's batches are appended as they are (producer id -1 to the log: no
// window is checked or built; restoreProducers gives it the fold's after the replay).
func (c *Committer) replayObject(l *batchlog.Log, key string, buf []byte, seq uint64, fold bool,
	byID map[[16]byte]*batchlog.Topic, ends map[*batchlog.Partition]int64, restored map[*batchlog.Partition]bool, maxPID *int64) (int, error) {
	h, entries, err := Decode(buf)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	if h.Sequence != seq {
		return 0, fmt.Errorf("diskless: %s says it is object %d", key, h.Sequence)
	}
	if err := c.fold(seq, entries, fold, time.Now().UnixMilli()); err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	var wg sync.WaitGroup
	var scratch []byte
	req := &batchlog.Request{Done: func(*batchlog.Request) { wg.Done() }}
	next := map[*batchlog.Partition]int64{}
	for _, e := range entries {
		if e.State != nil {
			continue
		}
		t := byID[e.TopicID]
		if t == nil || int(e.Partition) >= len(t.Partitions) {
			continue // a topic deleted since (its description gone): nothing to bring back
		}
		p := t.Partitions[e.Partition]
		bh, _ := wire.ParseBatchHeader(e.Batch) // Decode checked it
		end := e.Base + int64(bh.LastOffsetDelta) + 1
		*maxPID = max(*maxPID, bh.ProducerID)
		exp, ok := next[p]
		if !ok {
			exp = p.HighWatermark()
		}
		switch {
		case end <= exp: // held locally already (the same batch, or this disk diverged: lineage.go), or in the remote tier
			var err error
			if scratch, err = checkHeld(l, p, e.Base, e.Batch, scratch); err != nil {
				return 0, err
			}
		case e.Base == exp && int64(bh.NumRecords) == end-e.Base && restored[p]:
			req.Appends = append(req.Appends, batchlog.Append{Partition: p, Batch: e.Batch, ProducerID: -1, BaseSequence: -1, NumRecords: bh.NumRecords})
			next[p] = end
		case e.Base == exp && int64(bh.NumRecords) == end-e.Base:
			a := batchlog.Append{Partition: p, Batch: e.Batch, ProducerID: bh.ProducerID, ProducerEpoch: bh.ProducerEpoch,
				BaseSequence: bh.BaseSequence, NumRecords: bh.NumRecords, Transactional: bh.IsTransactional()}
			if bh.IsControl() {
				// A transaction marker: appended as the coordinator's was, closing the
				// producer's transaction here (an abort's range into the aborted index).
				kind, err := wire.ControlBatchType(e.Batch)
				if err != nil || end-e.Base != 1 {
					return 0, fmt.Errorf("diskless: %s: %s partition %d: control batch at %d: %v", key, t.Name, e.Partition, e.Base, err)
				}
				a.Marker, a.Transactional = batchlog.AbortMarker, false
				if kind == wire.ControlCommit {
					a.Marker = batchlog.CommitMarker
				}
			}
			req.Appends = append(req.Appends, a)
			next[p] = end
		default:
			return 0, fmt.Errorf("diskless: %s: %s partition %d: batch %d..%d does not continue the log at %d", key, t.Name, e.Partition, e.Base, end, exp)
		}
		ends[p] = max(ends[p], end)
	}
	if len(req.Appends) == 0 {
		return 0, nil
	}
	wg.Add(1)
	l.Submit(req)
	wg.Wait()
	for i := range req.Appends {
		a := &req.Appends[i]
		h, _ := wire.ParseBatchHeader(a.Batch)
		if a.Err != wire.ErrNone || a.BaseOffset != h.BaseOffset {
			return 0, fmt.Errorf("diskless: %s: %s partition %d: replaying batch at %d gave offset %d, error %d",
				key, a.Partition.Topic, a.Partition.Index, h.BaseOffset, a.BaseOffset, a.Err)
		}
	}
	return len(req.Appends), nil
}

// readAhead reads the objects of log, at most recoverReaders ahead of the replay (which calls
// taken as it takes each), and sends each one's bytes (or its error) on its channel: the
// replay takes them in order while the next are read, so a restore waits for about one round
// trip of the bucket, not one per object.
func (c *Committer) readAhead(ctx context.Context, log []listed, hdrs map[uint64]Header) ([]chan objectBody, func()) {
	out := make([]chan objectBody, len(log))
	for i := range out {
		out[i] = make(chan objectBody, 1)
	}
	sem := make(chan struct{}, recoverReaders)
	go func() {
		for i, o := range log {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for _, ch := range out[i:] {
					ch <- objectBody{err: ctx.Err()}
				}
				return
			}
			go func() {
				buf := make([]byte, o.size)
				h := hdrs[o.n] // read only, once chain has filled it
				if c.cfg.Cache != nil && c.cfg.Cache.ReadAt(o.n, o.size, 0, buf) && len(buf) >= format.HeaderLen+format.TrailerLen &&
					crc32.Checksum(buf[:len(buf)-format.TrailerLen], format.Castagnoli) == binary.BigEndian.Uint32(buf[len(buf)-format.TrailerLen:]) && sameHeader(buf, o.n, h) {
					out[i] <- objectBody{body: buf, slot: true, cached: true}
					return
				}
				err := c.retrying(ctx, "reading "+o.key, func() error { return c.cfg.Bucket.ReadAt(ctx, o.key, 0, buf) })
				if err == nil && c.cfg.Cache != nil && !sameHeader(buf, o.n, h) {
					c.cfg.Cache.Drop()
					err = fmt.Errorf("diskless: %s: its header is not the one its local copy gave (the copy is dropped: start again)", o.key)
				}
				out[i] <- objectBody{body: buf, err: err, slot: true}
			}()
		}
	}()
	return out, func() { <-sem }
}

// recoverReaders bounds the commit objects read ahead of the replay (at most 8 MiB each at
// the default --diskless-commit-bytes: 64 MiB).
const recoverReaders = 8

type objectBody struct {
	body   []byte
	err    error
	slot   bool // read under a slot of readAhead's, which the replay gives back
	cached bool // read from Config.Cache
}

// sameHeader says whether obj is commit object n with the epoch and predecessor of h.
func sameHeader(obj []byte, n uint64, h Header) bool {
	return len(obj) >= format.HeaderLen && string(obj[:4]) == format.Magic && binary.BigEndian.Uint64(obj[24:]) == n &&
		binary.BigEndian.Uint64(obj[8:]) == h.Epoch && binary.BigEndian.Uint64(obj[40:]) == h.After
}

// uploadLocal PUTs p's local batches from offset from (what the bucket holds of p ends there)
// up to its high watermark, in commit objects of at most CommitBytes.
func (c *Committer) uploadLocal(ctx context.Context, l *batchlog.Log, t *batchlog.Topic, p *batchlog.Partition, from int64) (int, error) {
	from = max(from, p.LocalLogStartOffset())
	hw := p.HighWatermark()
	n := 0
	var data []byte
	for from < hw {
		var err error
		data, err = l.ReadBatches(p, from, hw, c.cfg.CommitBytes, true, data[:0])
		if err != nil {
			return n, fmt.Errorf("diskless: read %s partition %d at %d: %w", t.Name, p.Index, from, err)
		}
		o := &object{buf: format.NewObject(nil)}
		for len(data) > 0 {
			bh, err := wire.ParseBatchHeader(data)
			size := int(bh.BatchLength) + 12
			if err != nil || size > len(data) {
				return n, fmt.Errorf("diskless: %s partition %d: a stored batch at %d does not read", t.Name, p.Index, from)
			}
			if end := bh.BaseOffset + int64(bh.LastOffsetDelta) + 1; end > from && bh.BaseOffset >= from {
				o.buf = format.AppendEntry(o.buf, t.ID, p.Index, bh.BaseOffset, data[:size])
				o.entries++
				from = end
			}
			data = data[size:]
		}
		if o.entries == 0 {
			return n, fmt.Errorf("diskless: %s partition %d: no stored batch at %d below %d", t.Name, p.Index, from, hw)
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(time.Minute)
		}
		if !c.put(o, deadline) {
			return n, fmt.Errorf("diskless: upload of %s partition %d's unsent batches failed", t.Name, p.Index)
		}
		c.foldLanded(o.seq, o.entryList())
		n += int(o.entries)
	}
	return n, nil
}

// Describe writes t's description to the bucket (tier.DescribeTopic) unless this run wrote it
// as it is: the catalog entry a restore recreates a diskless topic from. The admin APIs call
// it before answering a CreateTopics, CreatePartitions or AlterConfigs of a diskless topic.
func (c *Committer) Describe(ctx context.Context, t *batchlog.Topic) error {
	if !t.Settings.Diskless {
		return nil
	}
	fp := fmt.Sprintf("%x/%d/%v", t.ID, len(t.Partitions), t.Configs)
	c.descMu.Lock()
	defer c.descMu.Unlock()
	last := c.described[t.Name]
	if last.fp == fp {
		return nil
	}
	var epoch uint64
	if c.cfg.Epoch != nil {
		epoch = c.cfg.Epoch()
	}
	key, err := tier.DescribeTopic(ctx, c.cfg.Bucket, t, last.key, epoch)
	if err != nil {
		return fmt.Errorf("diskless: describe topic %s: %w", t.Name, err)
	}
	c.described[t.Name] = description{key: key, fp: fp}
	return nil
}

type description struct{ key, fp string }

// describeRetrying is Recover's Describe, tried again with a backoff (50 ms doubling to 5 s)
// until ctx ends: one failed PUT (a 5xx, a reply lost) must not stop the node's start, as it
// does not stop the commit loop. Writing a description again is harmless: each try takes a
// new key, and the newest is in force.
func (c *Committer) describeRetrying(ctx context.Context, t *batchlog.Topic) error {
	return c.retrying(ctx, "writing the description of "+t.Name, func() error { return c.Describe(ctx, t) })
}

// retrying runs call until it succeeds or ctx ends, with a backoff from 50 ms doubling to 5 s:
// Recover's calls to the bucket, so that a 5xx, a cut connection or a bucket that is down for a
// while delays the node's start (logged at each failure) rather than failing it. An object
// that is not in the bucket (ErrNotFound, ErrOutOfRange) will not come by waiting: returned.
func (c *Committer) retrying(ctx context.Context, what string, call func() error) error {
	backoff := 50 * time.Millisecond
	for {
		err := call()
		if err == nil || errors.Is(err, objstore.ErrNotFound) || errors.Is(err, objstore.ErrOutOfRange) {
			return err
		}
		c.cfg.Logger.Warn("diskless: recovery: "+what+" failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}
