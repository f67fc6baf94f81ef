package diskless

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"inlet/batchlog"
	"inlet/objstore"
	"inlet/tier"
	"inlet/wire"
)

// RecoverStats says what Recover did.
type RecoverStats struct {
	Objects  int // commit objects read
	Replayed int // batches appended to the local log from them
	Uploaded int // local batches never in the bucket, PUT now
	Offsets  int // consumer group offsets written to the catalog from state entries (state.go)
	Txns     int // transactional ids' records written to the catalog (txn_state.go)
	Duration time.Duration
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
	type listed struct {
		key  string
		size int64
		n    uint64
	}
	var objs []listed
	err := c.retrying(ctx, "listing the commit log", func() error {
		objs = objs[:0]
		return c.cfg.Bucket.List(ctx, LogPrefix, func(key string, size int64) error {
			if n, ok := parseLogKey(key); ok {
				objs = append(objs, listed{key, size, n}) // in number order: the keys sort so
			}
			return nil
		})
	})
	if err != nil {
		return st, err
	}
	byID := map[[16]byte]*batchlog.Topic{}
	for _, t := range l.Topics() {
		if t.Settings.Diskless {
			byID[t.ID] = t
		}
	}
	// The log: each object follows the one its header names (After), so that an object a
	// writer that had lost the prefix landed late is void (a stale object, skipped by the
	// next writer), and so is one of an older epoch than an object before it, and one that
	// follows an object not in the log (a gap: its PUT never landed, or it is void).
	var log []listed
	var epoch uint64
	lastOf := func() uint64 {
		if len(log) == 0 {
			return 0
		}
		return log[len(log)-1].n
	}
	for _, o := range objs {
		var hb [headerLen]byte
		if err := c.retrying(ctx, "reading "+o.key, func() error { return c.cfg.Bucket.ReadAt(ctx, o.key, 0, hb[:]) }); err != nil {
			return st, fmt.Errorf("diskless: %s: %w", o.key, err)
		}
		after, e := binary.BigEndian.Uint64(hb[40:]), binary.BigEndian.Uint64(hb[8:])
		if string(hb[:4]) != magic || e < epoch {
			c.cfg.Logger.Warn("diskless: commit object skipped: not of the log's writers", "key", o.key, "epoch", e)
			continue
		}
		for len(log) > 0 && log[len(log)-1].n > after {
			c.cfg.Logger.Warn("diskless: commit object void: a stale writer's", "key", log[len(log)-1].key)
			log = log[:len(log)-1]
		}
		if lastOf() != after {
			c.cfg.Logger.Warn("diskless: commit object void: it follows an object not in the log", "key", o.key, "after", LogKey(after))
			continue
		}
		epoch = e
		log = append(log, o)
	}
	// Past the log's last object, only the objects of PUTs that were in flight when a
	// writer stopped (never answered: they wait for the missing one) may lie; more than a
	// writer can have in flight, twice over (a renumbering), is a log that lost objects.
	tail, last := lastOf(), uint64(0)
	if len(objs) > 0 {
		last = objs[len(objs)-1].n
	}
	if last-tail > 2*MaxPutsInFlightLimit {
		return st, fmt.Errorf("diskless: %d objects past the log's last (%s), more than a writer stopped with PUTs in flight leaves: the commit log lost objects", last-tail, LogKey(tail))
	}
	ends := map[*batchlog.Partition]int64{}
	maxPID := int64(-1)
	fold := &stateFold{groups: groupsFold{}, txns: txnFold{}}
	c.replaying.Store(true)
	for _, o := range log {
		n, err := c.replayObject(ctx, l, o.key, o.size, o.n, byID, ends, &maxPID, fold)
		if err != nil {
			c.replaying.Store(false)
			return st, err
		}
		st.Objects++
		st.Replayed += n
	}
	c.replaying.Store(false)
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
	maxPID = max(maxPID, txnPID)
	// The producer ids of the replayed windows were handed out by the node that wrote them:
	// none may be handed out again (a new producer would meet an old one's window).
	if err := l.Meta().ReserveProducerIDsPast(maxPID); err != nil {
		return st, err
	}
	c.next, c.after = last+1, tail
	if last > tail {
		// Objects past the log's end: an empty object naming its last one voids them before
		// anything is served, so they stay void if a late PUT fills the gap before them.
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(time.Minute)
		}
		if !c.put(&object{buf: newObject(nil)}, deadline) {
			return st, fmt.Errorf("diskless: writing the object that voids %s..%s failed", LogKey(tail+1), LogKey(last))
		}
	}
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
	st.Duration = time.Since(began)
	c.stats.RecoverObjects.Store(int64(st.Objects))
	c.stats.RecoverReplayed.Store(int64(st.Replayed))
	c.stats.RecoverUploaded.Store(int64(st.Uploaded))
	c.stats.RecoverNanos.Store(int64(st.Duration))
	c.start()
	return st, nil
}

// replayObject appends the batches of commit object seq that the local log lacks.
func (c *Committer) replayObject(ctx context.Context, l *batchlog.Log, key string, size int64, seq uint64,
	byID map[[16]byte]*batchlog.Topic, ends map[*batchlog.Partition]int64, maxPID *int64, fold *stateFold) (int, error) {
	buf := make([]byte, size)
	if err := c.retrying(ctx, "reading "+key, func() error { return c.cfg.Bucket.ReadAt(ctx, key, 0, buf) }); err != nil {
		return 0, err
	}
	h, entries, err := Decode(buf)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	if h.Sequence != seq {
		return 0, fmt.Errorf("diskless: %s says it is object %d", key, h.Sequence)
	}
	var wg sync.WaitGroup
	req := &batchlog.Request{Done: func(*batchlog.Request) { wg.Done() }}
	next := map[*batchlog.Partition]int64{}
	for _, e := range entries {
		if e.State != nil {
			if err := fold.add(-e.Partition, e.State); err != nil {
				return 0, fmt.Errorf("%s: %w", key, err)
			}
			continue
		}
		t := byID[e.TopicID]
		if t == nil || int(e.Partition) >= len(t.Partitions) {
			continue // a topic deleted since (its description gone): nothing to bring back
		}
		p := t.Partitions[e.Partition]
		bh, _ := wire.ParseBatchHeader(e.Batch) // Decode checked it
		end := e.Base + int64(bh.LastOffsetDelta) + 1
		exp, ok := next[p]
		if !ok {
			exp = p.HighWatermark()
		}
		switch {
		case end <= exp: // held locally already
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
			*maxPID = max(*maxPID, bh.ProducerID)
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
		o := &object{buf: newObject(nil)}
		for len(data) > 0 {
			bh, err := wire.ParseBatchHeader(data)
			size := int(bh.BatchLength) + 12
			if err != nil || size > len(data) {
				return n, fmt.Errorf("diskless: %s partition %d: a stored batch at %d does not read", t.Name, p.Index, from)
			}
			if end := bh.BaseOffset + int64(bh.LastOffsetDelta) + 1; end > from && bh.BaseOffset >= from {
				o.buf = appendEntry(o.buf, t.ID, p.Index, bh.BaseOffset, data[:size])
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
