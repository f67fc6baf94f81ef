package batchlog

import (
	"encoding/binary"
	"fmt"
	"time"

	"inlet/idem"
	"inlet/wire"
)

// commitLoop is the single committer goroutine (see the package comment). It owns
// Partition.next and l.producers.
func (l *Log) commitLoop() {
	defer l.done.Done()
	defer close(l.pending)
	var (
		reqs    []*Request
		carried *Request
	)
	for {
		reqs = reqs[:0]
		var first *Request
		switch {
		case carried != nil:
			first, carried = carried, nil
		default:
			select {
			case first = <-l.queue:
			case <-l.stop:
				// Drain what was submitted before Close, then stop.
				select {
				case first = <-l.queue:
				default:
					l.finalCheckpoint()
					return
				}
			}
		}
		reqs = append(reqs, first)
		bytes := requestBytes(first)
	drain:
		for bytes < l.opts.MaxGroupBytes {
			select {
			case r := <-l.queue:
				n := requestBytes(r)
				if bytes+n > l.opts.MaxGroupBytes {
					carried = r
					break drain
				}
				reqs = append(reqs, r)
				bytes += n
			default:
				break drain
			}
		}
		l.commitGroup(reqs, bytes, false)
	}
}

// finalCheckpoint writes the metadata changed since the last checkpoint in a group of its own,
// so that a restart after Close replays nothing.
func (l *Log) finalCheckpoint() {
	s := &l.scratch
	if l.noFinalCheckpoint || len(s.partitions) == 0 && len(s.producers) == 0 && len(s.expired) == 0 {
		return
	}
	l.commitGroup(nil, 0, true)
}

func requestBytes(r *Request) int {
	n := 0
	for i := range r.Appends {
		n += len(r.Appends[i].Batch)
	}
	return n
}

// groupScratch is reused by the committer across groups. It collects what changed since the
// last group that carried metadata (see Store.MetadataInterval).
type groupScratch struct {
	// gen numbers the periods between metadata groups; Partition.metaGen and touched hold the
	// period in which a partition or producer window was last added to the lists below.
	gen        uint64
	producers  []producerKey
	touched    map[producerKey]uint64
	expired    []producerKey // windows dropped (producer.id.expiration.ms) since the last metadata
	nowMs      int64         // the group's time: a producer window's LastWrite
	partitions []*Partition
	lastMeta   time.Time // when the last group carrying metadata was built
	// forceMeta: the group being built drops index entries (compaction), so it must carry the
	// checkpoint: replay must not index again, from the segments, a batch it dropped.
	forceMeta bool
	key, kv   []byte // the store copies keys and values on set, so one buffer serves all
}

// commitGroup commits reqs as one group; withMetadata makes it carry the metadata whatever
// the time since the last checkpoint.
func (l *Log) commitGroup(reqs []*Request, bytes int, withMetadata bool) {
	pg := l.getPending()
	pg.requests = append(pg.requests[:0], reqs...)
	pg.advances = pg.advances[:0]
	clear(pg.aborts)
	pg.aborts = pg.aborts[:0]
	pg.records, pg.bytes, pg.dl = 0, 0, nil
	if l.opts.Observer != nil {
		pg.start = time.Now()
	}
	l.checkFreeSpace()
	if l.failed.Load() || l.suspended.Load() && !l.resume() {
		failAppends(reqs, wire.ErrKafkaStorageError)
		l.pending <- pg
		return
	}
	s := &l.scratch
	if s.gen == 0 {
		s.gen = 1 // zero is what touched and metaGen read before anything was added
	}
	if s.touched == nil {
		s.touched = map[producerKey]uint64{}
	}
	s.nowMs = time.Now().UnixMilli()
	g := l.store.NewGroup(bytes)
	pg.g = g
	for _, r := range reqs {
		if r.Inspect != nil {
			r.Inspect()
		}
		for i := range r.Appends {
			l.commitAppend(g, pg, r, &r.Appends[i])
		}
	}
	if every := l.store.MetadataInterval(); withMetadata || every == 0 || s.forceMeta || time.Since(s.lastMeta) >= every {
		l.addMetadata(g)
	}
	if err := g.Apply(); err != nil {
		if l.isNoSpace(err) {
			l.suspend(err) // the completer fails this group and those before it still unsynced
		} else {
			l.fail(fmt.Errorf("apply group: %w", err))
		}
	}
	l.pending <- pg
}

// failAppends answers every append of reqs not already refused with code.
func failAppends(reqs []*Request, code int16) {
	for _, r := range reqs {
		for i := range r.Appends {
			if r.Appends[i].Err == wire.ErrNone {
				r.Appends[i].Err = code
			}
		}
	}
}

// addMetadata adds to g the high watermark of every partition and the window of every producer
// changed since the last group that carried them, and starts a new period.
func (l *Log) addMetadata(g Group) {
	s := &l.scratch
	if cap(s.key) < producerKeyLen {
		s.key = make([]byte, producerKeyLen)
	}
	for _, p := range s.partitions {
		k := partKey(s.key[:0], kindHigh, p.ID)
		s.kv = binary.BigEndian.AppendUint64(s.kv[:0], uint64(p.next))
		s.kv = binary.BigEndian.AppendUint64(s.kv, uint64(p.logStart.Load()))
		g.Set(k, s.kv)
	}
	// Expired windows first: one that came back since (written again) is set after.
	for _, pk := range s.expired {
		k := s.key[:producerKeyLen]
		putProducerKey(k, pk.id, pk.partition)
		g.Del(k)
	}
	clear(s.expired)
	s.expired = s.expired[:0]
	for _, pk := range s.producers {
		st := l.producers[pk]
		if st == nil {
			continue // expired since it changed (its delete is above)
		}
		k := s.key[:producerKeyLen]
		putProducerKey(k, pk.id, pk.partition)
		s.kv = st.AppendBinary(s.kv[:0])
		g.Set(k, s.kv)
	}
	g.CarriesMetadata()
	s.forceMeta = false
	clear(s.partitions)
	s.partitions = s.partitions[:0]
	s.producers = s.producers[:0]
	s.gen++
	s.lastMeta = time.Now()
}

// commitAppend runs the idempotence check for one batch and, when it is new, assigns its
// offsets and adds it to the group.
func (l *Log) commitAppend(g Group, pg *pendingGroup, r *Request, a *Append) {
	if a.Err != wire.ErrNone || a.Partition == nil {
		return
	}
	p := a.Partition
	if a.Relocate {
		if a.Batch == nil {
			// Compaction removed every record of the batch: its index entry goes, in a group
			// that moves the checkpoint past the batch (and every copy of it).
			var k [dataKeyLen]byte
			putDataKey(k[:], p.ID, a.BaseOffset)
			g.Del(k[:])
			l.scratch.forceMeta = true
			return
		}
		// A copy moved forward by the reclaim pass, or rewritten by compaction: stored again
		// where it is, nothing assigned. The relocated key goes in the same group as the
		// copy's index entry.
		end := wire.BatchLastOffset(a.Batch) + 1
		g.SetData(p.ID, a.BaseOffset, a.Batch, true)
		if end > p.relocatedBelow.Load() {
			p.relocatedBelow.Store(end)
			g.Set(partKey(nil, kindRelocate, p.ID), binary.BigEndian.AppendUint64(nil, uint64(end)))
		}
		return
	}
	if p.diskless && l.opts.Diskless != nil && r.Completion != nil { // Done only (a restore's): local
		if pg.dl == nil {
			pg.dl = &DisklessGroup{}
		}
		r.held = true // answered by Diskless, after its Publish (a marker's too)
	}
	if a.Marker != NoMarker {
		l.commitMarker(g, pg, a)
		return
	}
	a.LogStartOffset = p.logStart.Load()
	a.AppendTime = -1
	var st *window
	if a.ProducerID >= 0 {
		key := producerKey{a.ProducerID, p.ID}
		st = l.producers[key]
		if st == nil {
			// A first batch: its window counts against the bounds (producers.go). The
			// verdict of a new window is always Append, so the window is made only when the
			// batch will be appended or refused by the transaction check below.
			if a.Err = l.admitWindow(r.Principal, l.scratch.nowMs); a.Err != wire.ErrNone {
				return
			}
			st = l.newWindow(key, r.Principal)
		}
		switch v, dup, code := st.Check(a.ProducerEpoch, a.BaseSequence, a.NumRecords); v {
		case idem.Duplicate:
			// Answered with the original offsets once this group's turn comes, which is
			// after the original's group is durable.
			a.BaseOffset = dup.BaseOffset
			return
		case idem.Reject:
			a.Err = code
			return
		}
		if a.Transactional || st.TxnFirstOffset >= 0 {
			if a.Err = l.checkTransactional(r.TransactionalID, a, &st.State); a.Err != wire.ErrNone {
				return
			}
		}
		l.touchProducer(key)
	} else if a.Transactional {
		a.Err = wire.ErrInvalidRecord // ValidateProduceBatch lets none through; keep it so
		return
	}
	base := l.assignOffsets(p, a)
	// baseOffset and partitionLeaderEpoch lie outside the CRC-32C (which covers bytes
	// 21..end), so patching them in place keeps the producer's batch valid byte for byte
	// (DefaultRecordBatch); Kafka stamps the epoch into every batch it appends, and consumers
	// that validate epochs expect the one Metadata reports, not the producer's -1.
	binary.BigEndian.PutUint64(a.Batch[0:8], uint64(base))
	wire.SetPartitionLeaderEpoch(a.Batch, p.LeaderEpoch())
	if a.LogAppendTime {
		// The append time is the commit time, so it is stamped here, under the committer,
		// in offset order (Kafka's LogValidator does it while assigning offsets).
		a.AppendTime = time.Now().UnixMilli()
		wire.SetLogAppendTime(a.Batch, a.AppendTime)
	}
	g.SetData(p.ID, base, a.Batch, false)
	a.BaseOffset = base
	if pg.dl != nil && p.diskless {
		pg.dl.Appends = append(pg.dl.Appends, a)
	}
	pg.records += int(a.NumRecords)
	pg.bytes += len(a.Batch)
	if st != nil {
		st.Push(a.ProducerEpoch, a.BaseSequence, a.NumRecords, base)
		st.LastWrite = l.scratch.nowMs
		l.windows.Touch(st, r.Principal)
		if a.Transactional {
			openTxn(p, &st.State, a.ProducerID, base)
		}
	}
	pg.advance(p)
}

// touchProducer lists the producer window key among those the next metadata group stores.
func (l *Log) touchProducer(key producerKey) {
	if l.scratch.touched[key] != l.scratch.gen {
		l.scratch.touched[key] = l.scratch.gen
		l.scratch.producers = append(l.scratch.producers, key)
	}
}

// assignOffsets gives a's records the partition's next offsets and returns the first.
func (l *Log) assignOffsets(p *Partition, a *Append) int64 {
	base := p.next
	p.next += int64(a.NumRecords)
	if p.metaGen != l.scratch.gen {
		p.metaGen = l.scratch.gen
		l.scratch.partitions = append(l.scratch.partitions, p)
	}
	return base
}

// completeLoop waits for each applied group's sync, in apply order, then publishes and answers.
func (l *Log) completeLoop() {
	defer l.done.Done()
	for pg := range l.pending {
		if pg.barrier != nil {
			close(pg.barrier) // every group before it has been answered (resume)
			continue
		}
		ok := !l.failed.Load() && !l.suspended.Load()
		if ok && pg.g != nil {
			if err := pg.g.Wait(); err != nil {
				if l.isNoSpace(err) {
					l.suspend(err)
				} else {
					l.fail(fmt.Errorf("sync group: %w", err))
				}
				ok = false
			}
		}
		if !ok {
			// Nothing of a group not known durable may be acknowledged or published; while
			// writes are suspended no group is written either (resume rebuilds the state).
			l.store.DropUnwritten()
			failAppends(pg.requests, wire.ErrKafkaStorageError)
		} else {
			// Aborted ranges first: a read_committed fetch that sees the new last stable
			// offset must also see the aborts below it.
			for _, ab := range pg.aborts {
				ab.p.addAborted(ab.a)
			}
			publish(pg.advances)
			if obs := l.opts.Observer; obs != nil && len(pg.requests) > 0 {
				obs.GroupDurable(pg.records, pg.bytes, time.Since(pg.start))
			}
		}
		for _, r := range pg.requests {
			if r.held && ok {
				pg.dl.requests = append(pg.dl.requests, r)
			} else if r.Completion != nil {
				r.Completion.Completed(r)
			} else if r.Done != nil {
				r.Done(r)
			}
			r.held = false
		}
		if pg.dl != nil && ok {
			l.opts.Diskless.Commit(pg.dl)
		}
		if pg.g != nil {
			pg.g.Release()
		}
		l.putPending(pg)
	}
}

// publish makes advances visible, then wakes the long polls parked on those partitions only.
func publish(advances []hwAdvance) {
	for _, adv := range advances {
		adv.p.txn.lso.Store(adv.lso)
		adv.p.hw.Store(adv.hw)
	}
	for _, adv := range advances {
		adv.p.wake()
	}
}

func (l *Log) fail(err error) {
	if l.failed.CompareAndSwap(false, true) {
		l.opts.OnFatal(err)
	}
}

func (l *Log) getPending() *pendingGroup {
	select {
	case pg := <-l.free:
		return pg
	default:
		return &pendingGroup{}
	}
}

func (l *Log) putPending(pg *pendingGroup) {
	pg.g = nil
	clear(pg.requests)
	pg.requests = pg.requests[:0]
	select {
	case l.free <- pg:
	default:
	}
}
