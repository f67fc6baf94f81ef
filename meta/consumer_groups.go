package meta

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// KIP-848 consumer groups are stored as Kafka's coordinator stores them in
// __consumer_offsets (GroupCoordinatorRecordHelpers): a small group-level record, and records
// per member, so that a change writes only the records it changes. Kafka's
// ConsumerGroupMetadata (epochs) is the group's record under its g key; its
// ConsumerGroupMemberMetadata (a member's subscription, client and rebalance timeout) is the
// member's s record; its ConsumerGroupCurrentMemberAssignment and
// ConsumerGroupTargetAssignmentMember (epochs, partitions held and being revoked, target)
// are the member's a record; its ConsumerGroupPartitionMetadata (the subscribed topics) is
// the t record. A member's subscription, up to a few hundred topic names, is thus written
// only when it changes, not with every epoch any member moves to.
//
//	g <group>                           GroupRecord (JSON; Consumer holds the epochs and the assignor)
//	G <u16 len><group> t                the subscribed topics' metadata
//	G <u16 len><group> s <member id>    a member's metadata and subscription
//	G <u16 len><group> a <member id>    a member's epochs, assignment and target assignment
//
// The values of t, s and a records are package groups' encodings. Until a group's next
// write, a group stored by an earlier release keeps everything in its g record
// (GroupRecord.Consumer with members); package groups reads both.
const (
	kindConsumer      = 'G'
	consumerTopicsRec = 't'
	consumerMemberSub = 's'
	consumerMemberAsg = 'a'
)

// consumerPrefix is the prefix of a group's G keys; the u16 length keeps "ab" from matching
// "abc"'s keys.
func consumerPrefix(group string) []byte {
	k := make([]byte, 0, 3+len(group)+1)
	k = append(k, kindConsumer)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

func consumerKey(group string, sub byte, member string) []byte {
	k := append(consumerPrefix(group), sub)
	return append(k, member...)
}

// parseConsumerKey splits a G key into its group, record kind and member id.
func parseConsumerKey(k []byte) (group string, sub byte, member string, err error) {
	if len(k) < 4 || k[0] != kindConsumer {
		return "", 0, "", fmt.Errorf("meta: corrupt consumer group key %s", QuoteKey(k))
	}
	gl := int(binary.BigEndian.Uint16(k[1:]))
	if len(k) < 3+gl+1 {
		return "", 0, "", fmt.Errorf("meta: corrupt consumer group key %s", QuoteKey(k))
	}
	group, sub, member = string(k[3:3+gl]), k[3+gl], string(k[3+gl+1:])
	switch {
	case sub == consumerTopicsRec && member == "", (sub == consumerMemberSub || sub == consumerMemberAsg) && member != "":
		return group, sub, member, nil
	}
	return "", 0, "", fmt.Errorf("meta: corrupt consumer group key %s", QuoteKey(k))
}

// ConsumerGroupWrite is one change of a consumer group: only the records it changes. A nil
// value leaves its record as stored.
type ConsumerGroupWrite struct {
	// Record is the group-level record (g <group>).
	Record *GroupRecord
	// Topics is the subscribed topics' record; DropTopics removes it instead.
	Topics     []byte
	DropTopics bool
	// Subscriptions and Assignments are members' s and a records, by member id.
	Subscriptions, Assignments map[string][]byte
	// Deleted lists members whose records are removed.
	Deleted []string
	// Clear removes every member and topics record of the group before the rest is written:
	// the group is now a classic group, whose record (Record) holds its members.
	Clear bool
}

// Empty reports whether w writes nothing.
func (w *ConsumerGroupWrite) Empty() bool {
	return w.Record == nil && w.Topics == nil && !w.DropTopics && len(w.Subscriptions) == 0 &&
		len(w.Assignments) == 0 && len(w.Deleted) == 0 && !w.Clear
}

// SaveConsumerGroup writes a change of a group's records in one synced batch: a crash keeps
// all of it or none, and an epoch handed out is not handed out again after a crash.
func (s *Store) SaveConsumerGroup(group string, w ConsumerGroupWrite) error {
	if s.db == nil || w.Empty() {
		return nil
	}
	if !fitsOffsetKey(group, "") {
		return ErrNameTooLong
	}
	b := s.db.NewBatch()
	defer b.Close()
	if w.Clear {
		p := consumerPrefix(group)
		_ = b.DeleteRange(p, PrefixEnd(p), nil)
	}
	if w.Record != nil {
		v, err := json.Marshal(w.Record)
		if err != nil {
			return err
		}
		_ = b.Set(append([]byte{kindGroup}, group...), v, nil)
	}
	switch {
	case w.DropTopics:
		_ = b.Delete(consumerKey(group, consumerTopicsRec, ""), nil)
	case w.Topics != nil:
		_ = b.Set(consumerKey(group, consumerTopicsRec, ""), w.Topics, nil)
	}
	for id, v := range w.Subscriptions {
		_ = b.Set(consumerKey(group, consumerMemberSub, id), v, nil)
	}
	for id, v := range w.Assignments {
		_ = b.Set(consumerKey(group, consumerMemberAsg, id), v, nil)
	}
	for _, id := range w.Deleted {
		_ = b.Delete(consumerKey(group, consumerMemberSub, id), nil)
		_ = b.Delete(consumerKey(group, consumerMemberAsg, id), nil)
	}
	return b.Commit(pebble.Sync)
}

// StoredConsumerMember is one member's records as LoadGroups finds them; a record missing
// is nil.
type StoredConsumerMember struct {
	Subscription, Assignment []byte
}

// loadConsumerRecords adds every G record to the groups LoadGroups returns.
func (s *Store) loadConsumerRecords(get func(string) *StoredGroup) error {
	return s.scan([]byte{kindConsumer}, func(k, v []byte) error {
		group, sub, member, err := parseConsumerKey(k)
		if err != nil {
			s.skipBadKey("consumer group record", k, err)
			return nil
		}
		g := get(group)
		v = append([]byte(nil), v...)
		if sub == consumerTopicsRec {
			g.ConsumerTopics = v
			return nil
		}
		if g.ConsumerMembers == nil {
			g.ConsumerMembers = map[string]*StoredConsumerMember{}
		}
		m := g.ConsumerMembers[member]
		if m == nil {
			m = &StoredConsumerMember{}
			g.ConsumerMembers[member] = m
		}
		if sub == consumerMemberSub {
			m.Subscription = v
		} else {
			m.Assignment = v
		}
		return nil
	})
}
