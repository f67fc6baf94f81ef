// Package meta is Inlet's catalog: what the node knows besides its records, kept in the same
// Pebble database as the log's index. It stores topic records (names, ids, partition ids and
// config overrides) and the partition-id counter, committed group offsets and group records,
// the transaction coordinator's records, dynamic broker configs, and allocates producer ids
// and the cluster id.
//
// Every write is its own synced Pebble write (or batch), made before the caller answers: the
// catalog has no committer and no pipeline. The record log (package batchlog) owns the
// in-memory topic table the produce and fetch paths read; it asks meta to write a topic's
// record and then publishes the change. The one exception to a write of meta's own is a topic
// deletion, whose record goes in the same synced batch as the log's keys of its partitions
// (DeleteTopic): a crash leaves either all of them or none.
//
// Path: a coordinator or an admin request calls a Store method, which writes with pebble.Sync
// and returns. Nothing here runs on the produce path.
//
// Who opens Pebble: Open, with the options of the record log that shares the database (Options
// mirrors the ones it needs), before the log, so that the transaction coordinator can load
// from it and be handed to the log. The log takes the Store at its own Open
// (batchlog.Options.Meta), keeps its keys (index, high watermarks, checkpoint, producer
// windows, log starts, aborted transactions) in DB, and closes it at Close. A Store with no
// database (Discard) stores nothing and loads nothing.
//
// Files: meta.go (Store, Open, the key layout, the producer-id and cluster-id allocation),
// pebble.go (Pebble's options and write-stall counting), topics.go (topic records),
// offsets.go (group offsets, group records, transaction records), consumer_groups.go (a
// KIP-848 consumer group's records per member), broker_configs.go,
// remote.go (the remote tier's manifest of uploaded objects).
//
// Lock order: Store.pidMu is held only across the reservation of a block of producer ids: the
// reserver's call (SetProducerIDReserver; package diskless takes only its own leaf lock) and
// the synced write.
package meta

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Key layout of the catalog. Every key starts with a one-byte kind; the record log's kinds
// (package batchlog's keys.go: d h p l r a c, and "m lay") never share a key with these.
// Integers are big-endian.
//
//	t <topic name>                        topic record (JSON, TopicRecord)
//	m pid                                 end of the last reserved producer-id block u64
//	m part                                next partition id u32
//	m cid                                 cluster id
//	m bcn, m bcd                          dynamic broker configs (JSON map): this broker's, the cluster default's
//	o <u16 len><group><u16 len><topic> <partition u32>   committed offset (offsets.go)
//	g <group>                             group record (JSON: protocol type, generation; a consumer group's epochs)
//	G <u16 len><group> t                  a consumer group's subscribed topics (consumer_groups.go)
//	G <u16 len><group> s|a <member id>    a consumer group member's subscription | epochs and assignment
//	x <transactional id>                  the transaction coordinator's record of the id (package txn's encoding)
//	R <partition u32> <base offset u64>   a remote object's record (remote.go)
const (
	kindTopic  = 't'
	kindMeta   = 'm'
	kindOffset = 'o'
	kindGroup  = 'g'
	kindTxn    = 'x'
	// kindConsumer ('G') is in consumer_groups.go.
)

var (
	metaProducerIDBlock = []byte{kindMeta, 'p', 'i', 'd'}
	metaPartitionSeq    = []byte{kindMeta, 'p', 'a', 'r', 't'}
	metaClusterID       = []byte{kindMeta, 'c', 'i', 'd'}
)

const producerIDBlock = 1024

// Store is the catalog of one node.
type Store struct {
	db           *pebble.DB // nil: nothing is stored (Discard)
	log          *slog.Logger
	stalls       writeStalls // Pebble's write stalls, counted by its event listener (pebble.go)
	memTableSize uint64

	clusterID string
	partSeq   uint32 // the stored partition-id counter as loaded; the log advances it (SaveTopic)

	pidMu       sync.Mutex
	nextPID     int64
	pidBlockEnd int64
	reservePIDs func(end int64) error // SetProducerIDReserver
}

// ErrProducerIDsUnavailable wraps a failure of the reserver that SetProducerIDReserver set: no
// id is handed out until a block is reserved (Kafka answers COORDINATOR_LOAD_IN_PROGRESS while
// its broker waits for a block, KIP-730).
var ErrProducerIDsUnavailable = errors.New("meta: no producer id block could be reserved")

// SetProducerIDReserver makes each block of producer ids durable through reserve (called with
// the block's end) before any id of it is handed out, beside the node's own synced record of
// it. A node with diskless topics keeps the block in the bucket
// (diskless.Committer.KeepProducerIDs), so that a node restored from there never hands out an
// id twice, not even one an earlier node handed to a producer that has not written yet. Set it
// before the node serves.
func (s *Store) SetProducerIDReserver(reserve func(end int64) error) {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	s.reservePIDs = reserve
}

// Discard returns a Store that stores nothing (the log's discard layout): a fresh cluster id,
// producer ids from 0, no topics, groups or transactions loaded.
func Discard(logger *slog.Logger) *Store {
	if logger == nil {
		logger = slog.Default()
	}
	return &Store{log: logger, clusterID: newClusterID()}
}

// load reads the cluster id (creating it in a new database), the producer-id block and the
// partition-id counter.
func (s *Store) load() error {
	if v, ok, err := s.get(metaClusterID); err != nil {
		return err
	} else if ok {
		s.clusterID = string(v)
	} else {
		s.clusterID = newClusterID()
		if err := s.db.Set(metaClusterID, []byte(s.clusterID), pebble.Sync); err != nil {
			return err
		}
	}
	if v, ok, err := s.get(metaProducerIDBlock); err != nil {
		return err
	} else if ok {
		if len(v) != 8 {
			// Not skipped: ids below it may have been handed out.
			return fmt.Errorf("meta: corrupt producer id block key %s", QuoteKey(metaProducerIDBlock))
		}
		// Ids below the persisted block end may have been handed out before the crash.
		s.nextPID = int64(binary.BigEndian.Uint64(v))
		s.pidBlockEnd = s.nextPID
	}
	if v, ok, err := s.get(metaPartitionSeq); err != nil {
		return err
	} else if ok {
		if len(v) != 4 {
			return fmt.Errorf("meta: corrupt partition id counter key %s", QuoteKey(metaPartitionSeq))
		}
		s.partSeq = binary.BigEndian.Uint32(v)
	}
	return nil
}

// DB is the Pebble database the catalog lives in, for the record log's own keys; nil for a
// Store that stores nothing.
func (s *Store) DB() *pebble.DB { return s.db }

// Close closes the database. The record log that took the Store closes it (batchlog's
// Log.Close), after its own files.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}

// MemTableSize is Pebble's memtable size, which the log's group commits must stay below half
// of (0 for a Store that stores nothing).
func (s *Store) MemTableSize() uint64 { return s.memTableSize }

// ClusterID is stable across restarts.
func (s *Store) ClusterID() string { return s.clusterID }

// AllocateProducerID returns a producer id never returned before, also across restarts: ids
// are reserved in durable blocks, and a restart resumes after the last reserved block.
func (s *Store) AllocateProducerID() (int64, error) {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	if s.nextPID >= s.pidBlockEnd {
		end := s.nextPID + producerIDBlock
		if s.reservePIDs != nil {
			if err := s.reservePIDs(end); err != nil {
				return -1, fmt.Errorf("%w: %v", ErrProducerIDsUnavailable, err)
			}
		}
		if s.db != nil {
			if err := s.db.Set(metaProducerIDBlock, binary.BigEndian.AppendUint64(nil, uint64(end)), pebble.Sync); err != nil {
				return -1, fmt.Errorf("meta: reserve producer ids: %w", err)
			}
		}
		s.pidBlockEnd = end
	}
	id := s.nextPID
	s.nextPID++
	return id, nil
}

// ReserveProducerIDsPast makes every id AllocateProducerID returns from now on greater than
// id, durably: a node restored from the bucket (package diskless) holds the windows of ids an
// earlier node handed out, which must not be handed out again.
func (s *Store) ReserveProducerIDsPast(id int64) error {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	if id < s.nextPID {
		return nil
	}
	if s.db != nil {
		if err := s.db.Set(metaProducerIDBlock, binary.BigEndian.AppendUint64(nil, uint64(id+1)), pebble.Sync); err != nil {
			return fmt.Errorf("meta: reserve producer ids: %w", err)
		}
	}
	s.nextPID, s.pidBlockEnd = id+1, id+1
	return nil
}

func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	// Kafka cluster ids are 22-character url-safe base64 of a UUID (Uuid.toString).
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	out := make([]byte, 22)
	var acc uint32
	bits := 0
	j := 0
	for _, c := range b {
		acc = acc<<8 | uint32(c)
		bits += 8
		for bits >= 6 && j < 22 {
			bits -= 6
			out[j] = alphabet[(acc>>uint(bits))&63]
			j++
		}
	}
	if j < 22 {
		out[j] = alphabet[(acc<<uint(6-bits))&63]
	}
	return string(out)
}

// get reads one key; ok is false when it is absent.
func (s *Store) get(k []byte) ([]byte, bool, error) {
	v, c, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	c.Close()
	return out, true, nil
}

func (s *Store) scan(prefix []byte, fn func(k, v []byte) error) error { return Scan(s.db, prefix, fn) }

// Scan calls fn with every key of db that starts with prefix, and its value, in key order,
// until fn returns an error (returned). The record log scans its own keys with it too.
func Scan(db *pebble.DB, prefix []byte, fn func(k, v []byte) error) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: PrefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	return it.Error()
}

// PrefixEnd returns the smallest key greater than every key starting with prefix (nil: none).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// QuoteKey names a stored key in an error or a log line: its hex, cut after 64 bytes.
func QuoteKey(k []byte) string {
	if len(k) <= 64 {
		return hex.EncodeToString(k)
	}
	return hex.EncodeToString(k[:64]) + "...(" + strconv.Itoa(len(k)) + " bytes)"
}

// skipBadKey logs a catalog key that does not decode and is skipped as it loads: committed
// offsets, group records and dynamic broker configs (the group starts without that offset or
// record, Kafka's defaults stand). A bad topic record or id counter still stops start-up.
// The message keeps the text it had when the log loaded these keys: alerts match it.
func (s *Store) skipBadKey(what string, k []byte, err error) {
	s.log.Error("batchlog: skipping a stored "+what+" that does not decode", "key", QuoteKey(k), "err", err)
}
