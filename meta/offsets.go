package meta

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Committed consumer-group offsets and group records, and the transaction coordinator's records. Kafka keeps both in the compacted
// __consumer_offsets topic (GroupMetadataManager); here they are Pebble keys, written with a
// synced batch before an OffsetCommit is answered, so a committed offset survives kill -9.
//
//	o <u16 len><group><u16 len><topic><partition u32> -> offset u64, leader epoch u32,
//	                                                      commit time u64, metadata
//	g <group>                                          -> GroupRecord (JSON)
//	G <u16 len><group> ...                             -> a consumer group's topics and members (consumer_groups.go)

// OffsetKey names one committed offset within a group.
type OffsetKey struct {
	Topic     string
	Partition int32
}

// CommittedOffset is what OffsetCommit stores and OffsetFetch returns.
type CommittedOffset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  int64 // unix ms
}

// GroupRecord is the durable part of a group's metadata (Kafka's GroupMetadataValue): the
// generation, so generations keep increasing across restarts, and, for a group that completed
// a rebalance (Stable), its protocol, leader and members with their assignments, so that after
// a restart the members carry on with heartbeats instead of rejoining, as they do after a
// Kafka coordinator moves.
type GroupRecord struct {
	ProtocolType string              `json:"protocol_type"`
	Generation   int32               `json:"generation"`
	Protocol     string              `json:"protocol,omitempty"`
	Leader       string              `json:"leader,omitempty"`
	Members      []GroupMemberRecord `json:"members,omitempty"`
	// StateMs is when an Empty group became Empty (unix ms; Kafka's currentStateTimestamp):
	// its offsets expire offsets.retention.minutes after it. 0 in the record of a group with
	// members, and in records written before it was kept.
	StateMs int64 `json:"state_ms,omitempty"`
	// Rebalancing says the group was saved between a rebalance's start and the leader's
	// SyncGroup: its members come back without assignments and rejoin.
	Rebalancing bool `json:"rebalancing,omitempty"`
	// Consumer is a KIP-848 consumer group's state (package groups encodes it: epochs,
	// members, their subscriptions and assignments); absent for a classic group.
	Consumer json.RawMessage `json:"consumer,omitempty"`
}

// GroupMemberRecord is one member of a group; its assignment is kept once the group is Stable.
type GroupMemberRecord struct {
	ID          string                `json:"id"`
	InstanceID  *string               `json:"instance_id,omitempty"`
	ClientID    string                `json:"client_id"`
	ClientHost  string                `json:"client_host"`
	SessionMs   int64                 `json:"session_ms"`
	RebalanceMs int64                 `json:"rebalance_ms"`
	Protocols   []GroupProtocolRecord `json:"protocols"` // in the member's order of preference
	Assignment  []byte                `json:"assignment"`
}

// GroupProtocolRecord is one protocol a member joined with, and its metadata.
type GroupProtocolRecord struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// maxKeyName is the longest group id or topic name the offset key's u16 lengths hold. The
// protocol's own limit (wire.MaxStringLength, checked where names arrive) is half of it; the
// codec refuses anything longer rather than write a key it cannot read back.
const maxKeyName = 1<<16 - 1

// ErrNameTooLong is returned for a group id or topic name the offset key cannot hold.
var ErrNameTooLong = errors.New("meta: name too long for an offset key")

func groupPrefix(group string) []byte {
	k := make([]byte, 0, 3+len(group))
	k = append(k, kindOffset)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

// offsetKey encodes a committed offset's key; group and topic must fit (fitsOffsetKey).
func offsetKey(group, topic string, partition int32) []byte {
	k := groupPrefix(group)
	k = binary.BigEndian.AppendUint16(k, uint16(len(topic)))
	k = append(k, topic...)
	return binary.BigEndian.AppendUint32(k, uint32(partition))
}

func fitsOffsetKey(group, topic string) bool {
	return len(group) <= maxKeyName && len(topic) <= maxKeyName
}

func parseOffsetKey(k []byte) (group string, key OffsetKey, err error) {
	bad := fmt.Errorf("meta: corrupt offset key %s", QuoteKey(k))
	if len(k) < 3 || k[0] != kindOffset {
		return "", key, bad
	}
	gl := int(binary.BigEndian.Uint16(k[1:]))
	if len(k) < 3+gl+2 {
		return "", key, bad
	}
	group = string(k[3 : 3+gl])
	rest := k[3+gl:]
	tl := int(binary.BigEndian.Uint16(rest))
	if len(rest) != 2+tl+4 {
		return "", key, bad
	}
	key.Topic = string(rest[2 : 2+tl])
	key.Partition = int32(binary.BigEndian.Uint32(rest[2+tl:]))
	return group, key, nil
}

const committedOffsetLen = 8 + 4 + 8

func appendCommittedOffset(v []byte, o CommittedOffset) []byte {
	v = binary.BigEndian.AppendUint64(v, uint64(o.Offset))
	v = binary.BigEndian.AppendUint32(v, uint32(o.LeaderEpoch))
	v = binary.BigEndian.AppendUint64(v, uint64(o.CommitTime))
	return append(v, o.Metadata...)
}

func parseCommittedOffset(v []byte) (CommittedOffset, error) {
	if len(v) < committedOffsetLen {
		return CommittedOffset{}, errors.New("meta: corrupt committed offset")
	}
	return CommittedOffset{
		Offset:      int64(binary.BigEndian.Uint64(v)),
		LeaderEpoch: int32(binary.BigEndian.Uint32(v[8:])),
		CommitTime:  int64(binary.BigEndian.Uint64(v[12:])),
		Metadata:    string(v[committedOffsetLen:]),
	}, nil
}

// CommitOffsets stores offsets of one group durably (one synced Pebble batch).
func (s *Store) CommitOffsets(group string, offsets map[OffsetKey]CommittedOffset) error {
	if s.db == nil || len(offsets) == 0 {
		return nil
	}
	for k := range offsets {
		if !fitsOffsetKey(group, k.Topic) {
			return ErrNameTooLong
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	var v []byte
	for k, o := range offsets {
		v = appendCommittedOffset(v[:0], o)
		_ = b.Set(offsetKey(group, k.Topic, k.Partition), v, nil)
	}
	return b.Commit(pebble.Sync)
}

// DeleteOffsets removes some committed offsets of a group (OffsetDelete, topic deletion).
func (s *Store) DeleteOffsets(group string, keys []OffsetKey) error {
	if s.db == nil || len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if !fitsOffsetKey(group, k.Topic) {
			return ErrNameTooLong
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		_ = b.Delete(offsetKey(group, k.Topic, k.Partition), nil)
	}
	return b.Commit(pebble.Sync)
}

// DeleteGroup removes a group's records and every offset it committed (DeleteGroups).
func (s *Store) DeleteGroup(group string) error {
	if s.db == nil {
		return nil
	}
	if !fitsOffsetKey(group, "") {
		return ErrNameTooLong
	}
	b := s.db.NewBatch()
	defer b.Close()
	p := groupPrefix(group)
	// The u16 length in the prefix keeps "ab" from matching "abc"'s keys.
	_ = b.DeleteRange(p, PrefixEnd(p), nil)
	_ = b.Delete(append([]byte{kindGroup}, group...), nil)
	cp := consumerPrefix(group)
	_ = b.DeleteRange(cp, PrefixEnd(cp), nil)
	return b.Commit(pebble.Sync)
}

// SaveGroup stores a classic group's record (a consumer group's go through SaveConsumerGroup).
// It is synced: a generation handed out must not be
// handed out again after a crash.
func (s *Store) SaveGroup(group string, rec GroupRecord) error {
	if s.db == nil {
		return nil
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.db.Set(append([]byte{kindGroup}, group...), v, pebble.Sync)
}

// StoredGroup is one group as LoadGroups finds it.
type StoredGroup struct {
	Record  GroupRecord
	Offsets map[OffsetKey]CommittedOffset
	// ConsumerTopics and ConsumerMembers are a consumer group's topics and member records
	// (consumer_groups.go), by member id; nil when it has none.
	ConsumerTopics  []byte
	ConsumerMembers map[string]*StoredConsumerMember
}

// LoadGroups reads every stored group record and committed offset. A key or value that does
// not decode is not record data: it is logged, named, and skipped (the group starts without
// that offset or record) rather than stopping start-up.
func (s *Store) LoadGroups() (map[string]*StoredGroup, error) {
	out := map[string]*StoredGroup{}
	if s.db == nil {
		return out, nil
	}
	get := func(name string) *StoredGroup {
		g := out[name]
		if g == nil {
			g = &StoredGroup{Offsets: map[OffsetKey]CommittedOffset{}}
			out[name] = g
		}
		return g
	}
	err := s.scan([]byte{kindGroup}, func(k, v []byte) error {
		var rec GroupRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			s.skipBadKey("group record", k, err)
			return nil
		}
		get(string(k[1:])).Record = rec
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.loadConsumerRecords(get); err != nil {
		return nil, err
	}
	err = s.scan([]byte{kindOffset}, func(k, v []byte) error {
		group, key, err := parseOffsetKey(k)
		if err == nil {
			var o CommittedOffset
			if o, err = parseCommittedOffset(v); err == nil {
				get(group).Offsets[key] = o
				return nil
			}
		}
		s.skipBadKey("committed offset", k, err)
		return nil
	})
	return out, err
}

// SaveTxn stores the transaction coordinator's record of a transactional id, synced: the
// coordinator answers only once it is durable.
func (s *Store) SaveTxn(id string, v []byte) error {
	if s.db == nil {
		return nil
	}
	return s.db.Set(append([]byte{kindTxn}, id...), v, pebble.Sync)
}

// LoadTxns reads every stored transactional id's record.
func (s *Store) LoadTxns() (map[string][]byte, error) {
	out := map[string][]byte{}
	if s.db == nil {
		return out, nil
	}
	err := s.scan([]byte{kindTxn}, func(k, v []byte) error {
		out[string(k[1:])] = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// DeleteTxn forgets a transactional id (transactional.id.expiration.ms), synced.
func (s *Store) DeleteTxn(id string) error {
	if s.db == nil {
		return nil
	}
	return s.db.Delete(append([]byte{kindTxn}, id...), pebble.Sync)
}
