package segments

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The segment index, written and read only here. Each stored batch has a Pebble data key
// (partition, base offset) whose value says where it lies:
//
//	segment id u32, position of the batch (after its entry header) u64, length u32
//
// and the checkpoint (CheckpointKey) says how far the segments are indexed:
//
//	segment id u32, end position u64
//
// The data key is the log's (its layout is in batchlog/keys.go, which takes it from here):
// with record data in Pebble (batchlog's LayoutPebble) a data key's value is the batch itself.

// KindData is the first byte of a data key.
const KindData = 'd'

// DataKeyLen is the length of a data key: kind, partition u32, base offset u64.
const DataKeyLen = 1 + 4 + 8

// PutDataKey writes the data key of the batch of partition at baseOffset into dst.
func PutDataKey(dst []byte, partition uint32, baseOffset int64) {
	dst[0] = KindData
	binary.BigEndian.PutUint32(dst[1:], partition)
	binary.BigEndian.PutUint64(dst[5:], uint64(baseOffset))
}

// DataKey returns the data key of the batch of partition at baseOffset.
func DataKey(partition uint32, baseOffset int64) []byte {
	k := make([]byte, DataKeyLen)
	PutDataKey(k, partition, baseOffset)
	return k
}

// DataKeyOffset is the base offset a data key names.
func DataKeyOffset(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[5:])) }

// CheckpointKey holds the checkpoint: "m ckpt", a key of the log's meta kind.
var CheckpointKey = []byte{'m', 'c', 'k', 'p', 't'}

// Loc is where a batch lies in the segments.
type Loc struct {
	Seg    uint32
	Pos    int64
	Length int
}

const (
	// LocLen is the length of an index value.
	LocLen        = 16
	checkpointLen = 12
)

// AppendLoc appends the index value of loc to dst.
func AppendLoc(dst []byte, loc Loc) []byte {
	dst = binary.BigEndian.AppendUint32(dst, loc.Seg)
	dst = binary.BigEndian.AppendUint64(dst, uint64(loc.Pos))
	return binary.BigEndian.AppendUint32(dst, uint32(loc.Length))
}

// ParseLoc reads an index value.
func ParseLoc(v []byte) (Loc, error) {
	if len(v) != LocLen {
		return Loc{}, fmt.Errorf("batchlog: segment index entry of %d bytes, not %d", len(v), LocLen)
	}
	return Loc{Seg: binary.BigEndian.Uint32(v), Pos: int64(binary.BigEndian.Uint64(v[4:])),
		Length: int(binary.BigEndian.Uint32(v[12:]))}, nil
}

// AppendCheckpoint appends the checkpoint value (segment seg indexed up to end) to dst.
func AppendCheckpoint(dst []byte, seg uint32, end int64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, seg)
	return binary.BigEndian.AppendUint64(dst, uint64(end))
}

// parseCheckpoint reads a checkpoint value.
func parseCheckpoint(v []byte) (seg uint32, end int64, err error) {
	if len(v) != checkpointLen {
		return 0, 0, fmt.Errorf("batchlog: corrupt checkpoint %x", v)
	}
	return binary.BigEndian.Uint32(v), int64(binary.BigEndian.Uint64(v[4:])), nil
}

// EachIndexedBatch calls fn with the base offset and value of every data key of partition
// below limit, starting with the batch that contains offset (the last one whose base offset is
// <= offset, or the first one if none is), until fn returns false. Both of the log's layouts
// read through it; the value is the batch itself (pebble layout) or its index entry (segments).
func EachIndexedBatch(db *pebble.DB, partition uint32, offset, limit int64, fn func(base int64, v []byte) (bool, error)) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: DataKey(partition, 0), UpperBound: DataKey(partition, limit)})
	if err != nil {
		return err
	}
	defer it.Close()
	valid := it.SeekLT(DataKey(partition, offset+1))
	if !valid {
		valid = it.First()
	}
	for ; valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if more, err := fn(DataKeyOffset(it.Key()), v); err != nil || !more {
			return err
		}
	}
	return it.Error()
}
