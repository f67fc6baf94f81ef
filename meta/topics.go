package meta

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Topic records. The record log keeps the topics in memory (name -> topic with its partitions)
// and asks for a record to be written before it publishes a change: so no batch can be stored
// for a topic a restart would not know. Partition ids are never reused (the partition-id
// counter only grows), so anything a racing produce writes for a partition of a deleted topic
// is an orphan that recovery and readers ignore rather than data that could surface in a new
// topic of the same name.

// TopicRecord is a topic's stored description.
type TopicRecord struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions []uint32          `json:"partitions"` // node-wide partition ids, by index
	Configs    map[string]string `json:"configs,omitempty"`
	// Creator is the principal whose request created the topic (its partitions count
	// against that principal's bound, max.partitions.per.principal); empty for a topic
	// created before it was kept, or by the node itself.
	Creator string `json:"creator,omitempty"`
}

func topicKey(name string) []byte { return append([]byte{kindTopic}, name...) }

// PartitionSeq is the next partition id as stored at Open: the log allocates from it, under
// its topic lock, and hands the new value to SaveTopic.
func (s *Store) PartitionSeq() uint32 { return s.partSeq }

// Topics reads every stored topic record, by name. A record that does not decode stops
// start-up: its partitions' records could not be found.
func (s *Store) Topics() ([]TopicRecord, error) {
	if s.db == nil {
		return nil, nil
	}
	var out []TopicRecord
	err := s.scan([]byte{kindTopic}, func(k, v []byte) error {
		var rec TopicRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("meta: topic record %q: %w", k[1:], err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// FirstTopic returns the name of the first stored topic record, if any (the log's start-up
// check that the segment files it names are there).
func (s *Store) FirstTopic() (string, bool, error) {
	if s.db == nil {
		return "", false, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kindTopic}, UpperBound: []byte{kindTopic + 1}})
	if err != nil {
		return "", false, err
	}
	var name string
	found := it.First()
	if found {
		name = string(it.Key()[1:])
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return "", false, err
	}
	return name, found, nil
}

// SaveTopic writes a topic's record and, when it changed, the partition-id counter partSeq
// (the id after the last one the topic's partitions use), in one synced batch. The caller
// serialises SaveTopic and DeleteTopic (the log's topic lock).
func (s *Store) SaveTopic(rec TopicRecord, partSeq uint32) error {
	if s.db == nil {
		return nil
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(topicKey(rec.Name), v, nil)
	if partSeq != s.partSeq {
		_ = b.Set(metaPartitionSeq, binary.BigEndian.AppendUint32(nil, partSeq), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	s.partSeq = partSeq
	return nil
}

// DeleteTopic deletes a topic's record in b, which holds the log's deletes of its partitions'
// keys, and commits b synced: a crash leaves the topic whole or gone.
func (s *Store) DeleteTopic(name string, b *pebble.Batch) error {
	_ = b.Delete(topicKey(name), nil)
	return b.Commit(pebble.Sync)
}
