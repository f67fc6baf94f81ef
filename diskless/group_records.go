package diskless

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"inlet/meta"
)

// Group records in the commit log. Beside the offsets (state.go), a group's records go to the
// bucket before the catalog takes them: a classic group's record (generation, protocol,
// leader, members and, once stable, their assignments: GroupStore.SaveGroup, at each join,
// sync and leave) and each change of a KIP-848 consumer group's records (the group record,
// its subscribed topics, each member's subscription and assignment:
// GroupStore.SaveConsumerGroup, at each heartbeat that moves an epoch). So a node rebuilt from
// the bucket has the groups as they were answered: a classic member heartbeats on in its
// generation, a consumer member in its epoch with its assignment, and no rebalance follows
// the loss of the node.
//
// The payload of a StateGroupRecords entry:
//
//	group u16 length + bytes, then meta.ConsumerGroupWrite as JSON (a classic group's record
//	is the write of its Record alone: the same catalog key)
//
// A start folds the writes of each group, in order, into one write (mergeGroupWrite), and
// applies it after the group's offsets (groupsFold.apply): a group deleted since the log
// began is deleted from the catalog first, whole.

// SaveGroup: a classic group's record.
func (s *GroupStore) SaveGroup(group string, rec meta.GroupRecord) error {
	if err := s.putGroupWrite(group, meta.ConsumerGroupWrite{Record: &rec}); err != nil {
		return err
	}
	return s.Store.SaveGroup(group, rec)
}

// SaveConsumerGroup: a change of a KIP-848 consumer group's records.
func (s *GroupStore) SaveConsumerGroup(group string, w meta.ConsumerGroupWrite) error {
	if w.Empty() {
		return nil
	}
	if err := s.putGroupWrite(group, w); err != nil {
		return err
	}
	return s.Store.SaveConsumerGroup(group, w)
}

func (s *GroupStore) putGroupWrite(group string, w meta.ConsumerGroupWrite) error {
	if !fits16(group) {
		return meta.ErrNameTooLong
	}
	v, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return s.c.putState(StateGroupRecords, append(appendString16(nil, group), v...))
}

func decodeGroupWrite(b []byte) (string, meta.ConsumerGroupWrite, error) {
	var w meta.ConsumerGroupWrite
	if len(b) < 2 || len(b)-2 < int(binary.BigEndian.Uint16(b)) {
		return "", w, fmt.Errorf("%w: group records", errBadState)
	}
	n := int(binary.BigEndian.Uint16(b))
	if err := json.Unmarshal(b[2+n:], &w); err != nil {
		return "", w, fmt.Errorf("%w: group records: %v", errBadState, err)
	}
	return string(b[2 : 2+n]), w, nil
}

// addRecords folds a StateGroupRecords entry.
func (f groupsFold) addRecords(payload []byte) error {
	group, w, err := decodeGroupWrite(payload)
	if err != nil {
		return err
	}
	g := f.group(group)
	if g.records == nil {
		g.records = &meta.ConsumerGroupWrite{}
	}
	mergeGroupWrite(g.records, w)
	return nil
}

// mergeGroupWrite folds w, written after into, into it: applying into alone to a catalog does
// what applying both in order would.
func mergeGroupWrite(into *meta.ConsumerGroupWrite, w meta.ConsumerGroupWrite) {
	if w.Clear {
		*into = meta.ConsumerGroupWrite{Clear: true}
	}
	if w.Record != nil {
		into.Record = w.Record
	}
	switch {
	case w.DropTopics:
		into.Topics, into.DropTopics = nil, true
	case w.Topics != nil:
		into.Topics, into.DropTopics = w.Topics, false
	}
	written := func(id string) {
		into.Deleted = slices.DeleteFunc(into.Deleted, func(d string) bool { return d == id })
	}
	for id, v := range w.Subscriptions {
		if into.Subscriptions == nil {
			into.Subscriptions = map[string][]byte{}
		}
		into.Subscriptions[id] = v
		written(id)
	}
	for id, v := range w.Assignments {
		if into.Assignments == nil {
			into.Assignments = map[string][]byte{}
		}
		into.Assignments[id] = v
		written(id)
	}
	for _, id := range w.Deleted {
		delete(into.Subscriptions, id)
		delete(into.Assignments, id)
		if !slices.Contains(into.Deleted, id) {
			into.Deleted = append(into.Deleted, id)
		}
	}
}
