package diskless

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	"inlet/diskless/format"
	"inlet/meta"
	"inlet/wire"
)

// Node state in the commit log. A node with the committer running carries its consumer
// groups' committed offsets in the commit objects, as state entries beside the batches
// (diskless/format, version 2), so that a node rebuilt from the bucket resumes every group from its
// last answered commit. An OffsetCommit (and a committed transaction's offsets, an
// OffsetDelete, a group's deletion, offset expiry, a deleted topic's offsets) goes:
//
//	GroupStore.CommitOffsets   encode the change, queue it in the open commit object
//	                           (commitState), wait for that object's PUT (at most
//	                           StateCommitTimeout), then write the catalog (meta) as before
//	the commit loop            PUTs the object in its window, with the batches, and answers
//	                           the entry as it answers produce requests
//
// So the bucket is never behind the catalog: what the catalog holds (and the coordinator
// answers from) was PUT first. A change whose PUT is not confirmed in time is answered an
// error (the coordinator's KAFKA_STORAGE_ERROR) and not written to the catalog; it stays
// queued and may still land, as a produce answered REQUEST_TIMED_OUT may: a client told of a
// failure cannot tell whether the commit took, as with Kafka.
//
// The wait holds the group's lock and the connection's worker for one commit window (100 ms
// at the default): requests on other connections and other groups go on; those of the same
// group wait behind it, as they wait behind the catalog's synced write.
//
// A start replays every state entry of the log in order into a fold (the last word on each
// offset, and whether the group was deleted since), and writes the result to the catalog
// before the coordinator loads it (recover.go): the catalog then holds what the bucket holds,
// for topics the node has.

// StateCommitTimeout bounds how long a group change waits for its commit object: Kafka's
// offsets.commit.timeout.ms (5000), the wait of an offset commit for its replicas.
const StateCommitTimeout = 5 * time.Second

// A group change (the payload of a StateGroupOffsets entry):
//
//	op u8 (opCommit, opDeleteOffsets, opDeleteGroup), group u16 length + bytes, count u32,
//	then count offsets: topic u16 length + bytes, partition i32, and for opCommit only
//	offset i64, leader epoch i32, commit time i64 (unix ms), metadata u32 length + bytes
//
// Big-endian; opDeleteGroup has no offsets.
const (
	opCommit        = 1
	opDeleteOffsets = 2
	opDeleteGroup   = 3
)

type groupOp struct {
	Op      byte
	Group   string
	Offsets []groupOffset
}

type groupOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	CommitTime  int64
	Metadata    string
}

func appendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// encodeGroupOp appends op's payload; names must fit a u16 length (fits16).
func encodeGroupOp(b []byte, op groupOp) []byte {
	b = append(b, op.Op)
	b = appendString16(b, op.Group)
	b = binary.BigEndian.AppendUint32(b, uint32(len(op.Offsets)))
	for _, o := range op.Offsets {
		b = appendString16(b, o.Topic)
		b = binary.BigEndian.AppendUint32(b, uint32(o.Partition))
		if op.Op == opCommit {
			b = binary.BigEndian.AppendUint64(b, uint64(o.Offset))
			b = binary.BigEndian.AppendUint32(b, uint32(o.LeaderEpoch))
			b = binary.BigEndian.AppendUint64(b, uint64(o.CommitTime))
			b = binary.BigEndian.AppendUint32(b, uint32(len(o.Metadata)))
			b = append(b, o.Metadata...)
		}
	}
	return b
}

var errBadGroupOp = errors.New("diskless: not a group state entry")

// decodeGroupOp reads what encodeGroupOp writes, all of b and nothing else.
func decodeGroupOp(b []byte) (groupOp, error) {
	var op groupOp
	r := stateReader{b: b, ok: true}
	op.Op = r.u8()
	op.Group = r.str16()
	n := r.u32()
	if op.Op < opCommit || op.Op > opDeleteGroup || (op.Op == opDeleteGroup && n != 0) || uint64(n) > uint64(len(b))/6 {
		return op, errBadGroupOp
	}
	for i := uint32(0); i < n && r.ok; i++ {
		o := groupOffset{Topic: r.str16(), Partition: int32(r.u32())}
		if op.Op == opCommit {
			o.Offset, o.LeaderEpoch, o.CommitTime = int64(r.u64()), int32(r.u32()), int64(r.u64())
			o.Metadata = string(r.bytes(int(r.u32())))
		}
		op.Offsets = append(op.Offsets, o)
	}
	if !r.ok || len(r.b) != 0 {
		return op, errBadGroupOp
	}
	return op, nil
}

type stateReader struct {
	b  []byte
	ok bool
}

func (r *stateReader) bytes(n int) []byte {
	if !r.ok || n < 0 || n > len(r.b) {
		r.ok, r.b = false, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *stateReader) u8() byte {
	if v := r.bytes(1); r.ok {
		return v[0]
	}
	return 0
}

func (r *stateReader) u32() uint32 {
	if v := r.bytes(4); r.ok {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *stateReader) u64() uint64 {
	if v := r.bytes(8); r.ok {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *stateReader) str16() string {
	v := r.bytes(2)
	if !r.ok {
		return ""
	}
	return string(r.bytes(int(binary.BigEndian.Uint16(v))))
}

// commitState queues a state entry in the open commit object. The channel is sent the
// entry's answer once: 0 when its object (and every one before it) is in the bucket, else the
// code the commit loop answers its produce requests with (fenced, closing, timed out).
func (c *Committer) commitState(kind int32, payload []byte) <-chan int16 {
	done := make(chan int16, 1)
	now := time.Now()
	c.mu.Lock()
	if c.fenced.Load() || c.closing {
		c.mu.Unlock()
		done <- wire.ErrNotLeaderOrFollower
		return done
	}
	o := c.openObject(entryOverhead + len(payload))
	before := len(o.buf)
	o.buf = format.AppendState(o.buf, kind, payload)
	o.sum = crc32.Update(o.sum, format.Castagnoli, o.buf[before:])
	o.entries++
	o.payload += int64(len(o.buf) - before)
	c.pending.Add(int64(len(o.buf) - before))
	o.groups = append(o.groups, &heldGroup{state: done, at: now})
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return done
}

// putState queues a state entry and waits for its commit object, at most StateCommitTimeout
// (or the request timeout, if shorter).
func (c *Committer) putState(kind int32, payload []byte) error {
	done := c.commitState(kind, payload)
	t := time.NewTimer(min(StateCommitTimeout, c.cfg.RequestTimeout))
	defer t.Stop()
	select {
	case code := <-done:
		if code != 0 {
			return fmt.Errorf("diskless: group state not in the bucket: error %d", code)
		}
		return nil
	case <-t.C:
		return errors.New("diskless: group state not in the bucket in time")
	}
}

// publish and answer complete a held group: a produce group's, or a state entry's.
func (h *heldGroup) publish() {
	if h.g != nil {
		h.g.Publish()
	}
}

func (h *heldGroup) answer(code int16) {
	if h.g != nil {
		h.g.Answer(code)
		return
	}
	h.state <- code // buffered, and answered once (heldGroup.answered)
}

// GroupStore is the group coordinator's store (groups.Store) on a node with the committer:
// the catalog, with every change of committed offsets PUT in a commit object before the
// catalog is written and the change answered.
type GroupStore struct {
	*meta.Store
	c *Committer
}

// GroupStore wraps the catalog m as the group coordinator's store.
func (c *Committer) GroupStore(m *meta.Store) *GroupStore { return &GroupStore{Store: m, c: c} }

func fits16(names ...string) bool {
	for _, n := range names {
		if len(n) > 1<<16-1 {
			return false
		}
	}
	return true
}

// CommitOffsets: OffsetCommit, a committed transaction's offsets.
func (s *GroupStore) CommitOffsets(group string, offsets map[meta.OffsetKey]meta.CommittedOffset) error {
	if len(offsets) == 0 {
		return nil
	}
	op := groupOp{Op: opCommit, Group: group}
	for k, o := range offsets {
		if !fits16(group, k.Topic) {
			return meta.ErrNameTooLong
		}
		op.Offsets = append(op.Offsets, groupOffset{Topic: k.Topic, Partition: k.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, CommitTime: o.CommitTime, Metadata: o.Metadata})
	}
	sortOffsets(op.Offsets)
	if err := s.c.putState(StateGroupOffsets, encodeGroupOp(nil, op)); err != nil {
		return err
	}
	return s.Store.CommitOffsets(group, offsets)
}

// DeleteOffsets: OffsetDelete, offset expiry, a deleted topic's offsets.
func (s *GroupStore) DeleteOffsets(group string, keys []meta.OffsetKey) error {
	if len(keys) == 0 {
		return nil
	}
	op := groupOp{Op: opDeleteOffsets, Group: group}
	for _, k := range keys {
		if !fits16(group, k.Topic) {
			return meta.ErrNameTooLong
		}
		op.Offsets = append(op.Offsets, groupOffset{Topic: k.Topic, Partition: k.Partition})
	}
	sortOffsets(op.Offsets)
	if err := s.c.putState(StateGroupOffsets, encodeGroupOp(nil, op)); err != nil {
		return err
	}
	return s.Store.DeleteOffsets(group, keys)
}

// DeleteGroup: DeleteGroups, and an expired group's removal.
func (s *GroupStore) DeleteGroup(group string) error {
	if !fits16(group) {
		return meta.ErrNameTooLong
	}
	if err := s.c.putState(StateGroupOffsets, encodeGroupOp(nil, groupOp{Op: opDeleteGroup, Group: group})); err != nil {
		return err
	}
	return s.Store.DeleteGroup(group)
}

func sortOffsets(os []groupOffset) {
	slices.SortFunc(os, func(a, b groupOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
}

// groupsFold is the result of a log's group changes, replayed in order: per group, the last
// word on each offset (nil: deleted), its record writes merged into one (group_records.go),
// and whether the group was deleted since the log began (then the catalog's copy of the group
// goes, whole, before the rest is written). Each deletion notes when it was folded (the
// stateFold's count of entries), so that one a landed checkpoint carried can go (dropCarried).
type groupsFold map[string]*foldedGroup

type foldedGroup struct {
	cleared   bool
	clearedAt uint64
	offsets   map[meta.OffsetKey]*meta.CommittedOffset
	goneAt    map[meta.OffsetKey]uint64 // when each nil in offsets was folded
	records   *meta.ConsumerGroupWrite  // nil: none written since the log began or the deletion
}

func (f groupsFold) group(name string) *foldedGroup {
	g := f[name]
	if g == nil {
		g = &foldedGroup{offsets: map[meta.OffsetKey]*meta.CommittedOffset{}}
		f[name] = g
	}
	return g
}

// add folds a group change in, folded as entry number at of the fold.
func (f groupsFold) add(payload []byte, at uint64) error {
	op, err := decodeGroupOp(payload)
	if err != nil {
		return err
	}
	g := f.group(op.Group)
	switch op.Op {
	case opDeleteGroup:
		g.cleared, g.clearedAt, g.records = true, at, nil
		clear(g.offsets)
		clear(g.goneAt)
	case opDeleteOffsets:
		if g.goneAt == nil {
			g.goneAt = map[meta.OffsetKey]uint64{} // most groups never delete an offset
		}
		for _, o := range op.Offsets {
			k := meta.OffsetKey{Topic: o.Topic, Partition: o.Partition}
			g.offsets[k], g.goneAt[k] = nil, at
		}
	case opCommit:
		for _, o := range op.Offsets {
			k := meta.OffsetKey{Topic: o.Topic, Partition: o.Partition}
			g.offsets[k] = &meta.CommittedOffset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, CommitTime: o.CommitTime, Metadata: o.Metadata}
			delete(g.goneAt, k)
		}
	}
	return nil
}

// dropCarried lets go of the deletions folded at or before entry through: a group's deletion,
// an offset's, and a group left with nothing. A deletion is in the fold for a start on the
// node's own disk whose catalog missed it; the catalog is written, synced, after the deletion's
// PUT and before its answer, so one it missed was never answered success, and either outcome
// of it is allowed; a restore on an empty disk has no catalog to delete from. So a deletion
// need not outlive the checkpoint that carried it, and a flood of groups made and deleted
// leaves nothing behind in the fold.
func (f groupsFold) dropCarried(through uint64) {
	for name, g := range f {
		if g.cleared && g.clearedAt <= through {
			g.cleared = false
		}
		for k, at := range g.goneAt {
			if at <= through {
				delete(g.offsets, k)
				delete(g.goneAt, k)
			}
		}
		if !g.cleared && len(g.offsets) == 0 && g.records == nil {
			delete(f, name)
		}
	}
}

// apply writes the fold to the catalog: a group deleted in the log is deleted first, then
// offsets of topics the node has (exists) are set, those deleted removed, and the records
// written. It returns how many offsets it set.
func (f groupsFold) apply(m *meta.Store, exists func(topic string) bool) (int, error) {
	set := 0
	for name, g := range f {
		if g.cleared {
			if err := m.DeleteGroup(name); err != nil {
				return set, err
			}
		}
		commit := map[meta.OffsetKey]meta.CommittedOffset{}
		var del []meta.OffsetKey
		for k, o := range g.offsets {
			switch {
			case o == nil:
				del = append(del, k)
			case exists(k.Topic):
				commit[k] = *o
			}
		}
		if err := m.DeleteOffsets(name, del); err != nil {
			return set, err
		}
		if err := m.CommitOffsets(name, commit); err != nil {
			return set, err
		}
		set += len(commit)
		if g.records != nil {
			if err := m.SaveConsumerGroup(name, *g.records); err != nil {
				return set, err
			}
		}
	}
	return set, nil
}
