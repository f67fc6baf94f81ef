package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The remote tier's manifest: one record per object uploaded to object storage (package
// tier), keyed by the node-wide partition id and the object's base offset. A record is written,
// synced, only after its object is stored whole, and before any local byte it covers may be
// reclaimed; it is deleted, synced, before its object is. An object without a record is an
// orphan (an upload cut short by a crash), which the tier deletes.
//
//	R <partition u32> <base offset u64>   remote object record (RemoteObject's encoding)
const kindRemote = 'R'

// RemoteObject is one uploaded object: the stored batches of a partition from Base up to
// End, then the object's index footer.
type RemoteObject struct {
	Partition    uint32 // node-wide partition id
	Base, End    int64  // the first offset of the first batch; the offset after the last batch
	DataLen      int64  // bytes of batch data; the footer starts there
	Size         int64  // bytes of the whole object
	MaxTimestamp int64  // the largest batch max timestamp in it
	Batches      int32
	UploadedMs   int64  // when its record was written
	Key          string // the object's key in the bucket, below the configured prefix
}

const remoteKeyLen = 1 + 4 + 8

func remoteKey(partition uint32, base int64) []byte {
	k := make([]byte, remoteKeyLen)
	k[0] = kindRemote
	binary.BigEndian.PutUint32(k[1:], partition)
	binary.BigEndian.PutUint64(k[5:], uint64(base))
	return k
}

const remoteFixedLen = 8 + 8 + 8 + 8 + 4 + 8 + 2

func appendRemoteObject(v []byte, o RemoteObject) []byte {
	v = binary.BigEndian.AppendUint64(v, uint64(o.End))
	v = binary.BigEndian.AppendUint64(v, uint64(o.DataLen))
	v = binary.BigEndian.AppendUint64(v, uint64(o.Size))
	v = binary.BigEndian.AppendUint64(v, uint64(o.MaxTimestamp))
	v = binary.BigEndian.AppendUint32(v, uint32(o.Batches))
	v = binary.BigEndian.AppendUint64(v, uint64(o.UploadedMs))
	v = binary.BigEndian.AppendUint16(v, uint16(len(o.Key)))
	return append(v, o.Key...)
}

var errBadRemoteRecord = errors.New("meta: remote object record does not decode")

func parseRemoteObject(k, v []byte) (RemoteObject, error) {
	if len(k) != remoteKeyLen || len(v) < remoteFixedLen {
		return RemoteObject{}, errBadRemoteRecord
	}
	o := RemoteObject{
		Partition:    binary.BigEndian.Uint32(k[1:]),
		Base:         int64(binary.BigEndian.Uint64(k[5:])),
		End:          int64(binary.BigEndian.Uint64(v)),
		DataLen:      int64(binary.BigEndian.Uint64(v[8:])),
		Size:         int64(binary.BigEndian.Uint64(v[16:])),
		MaxTimestamp: int64(binary.BigEndian.Uint64(v[24:])),
		Batches:      int32(binary.BigEndian.Uint32(v[32:])),
		UploadedMs:   int64(binary.BigEndian.Uint64(v[36:])),
	}
	n := int(binary.BigEndian.Uint16(v[44:]))
	if len(v) != remoteFixedLen+n || o.End <= o.Base || o.DataLen <= 0 || o.Size < o.DataLen || o.Batches <= 0 {
		return RemoteObject{}, errBadRemoteRecord
	}
	o.Key = string(v[remoteFixedLen:])
	return o, nil
}

// SaveRemoteObject records an uploaded object, synced.
func (s *Store) SaveRemoteObject(o RemoteObject) error {
	if s.db == nil {
		return nil
	}
	if len(o.Key) > 1<<16-1 {
		return fmt.Errorf("meta: object key of %d bytes", len(o.Key))
	}
	return s.db.Set(remoteKey(o.Partition, o.Base), appendRemoteObject(nil, o), pebble.Sync)
}

// SaveRemoteObjects records objects in one batch, synced once (a restore's records: one
// fsync rather than one an object).
func (s *Store) SaveRemoteObjects(objs []RemoteObject) error {
	if s.db == nil || len(objs) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, o := range objs {
		if len(o.Key) > 1<<16-1 {
			return fmt.Errorf("meta: object key of %d bytes", len(o.Key))
		}
		if err := b.Set(remoteKey(o.Partition, o.Base), appendRemoteObject(nil, o), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// DeleteRemoteObject forgets the record of partition's object at base, synced.
func (s *Store) DeleteRemoteObject(partition uint32, base int64) error {
	if s.db == nil {
		return nil
	}
	return s.db.Delete(remoteKey(partition, base), pebble.Sync)
}

// RemoteObjects calls fn with every recorded object, by partition id and then base offset.
// A record that does not decode is logged and skipped: its object is then an orphan, deleted
// by the tier, and a read of its range is answered as if it had been deleted by retention.
func (s *Store) RemoteObjects(fn func(RemoteObject) error) error {
	if s.db == nil {
		return nil
	}
	return s.scan([]byte{kindRemote}, func(k, v []byte) error {
		o, err := parseRemoteObject(k, v)
		if err != nil {
			s.skipBadKey("remote object record", k, err)
			return nil
		}
		return fn(o)
	})
}
