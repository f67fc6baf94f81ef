package batchlog

import (
	"encoding/binary"
	"fmt"
)

// The segment index, written and read only here. With segments, each stored batch has a
// Pebble data key (partition, base offset: keys.go) whose value says where it lies:
//
//	segment id u32, position of the batch (after its entry header) u64, length u32
//
// and the checkpoint (metaCheckpoint) says how far the segments are indexed:
//
//	segment id u32, end position u64
//
// With record data in Pebble (LayoutPebble) a data key's value is the batch itself.

// batchLoc is where a batch lies in the segments.
type batchLoc struct {
	seg    uint32
	pos    int64
	length int
}

const (
	batchLocLen   = 16
	checkpointLen = 12
)

// appendBatchLoc appends the index value of loc to dst.
func appendBatchLoc(dst []byte, loc batchLoc) []byte {
	dst = binary.BigEndian.AppendUint32(dst, loc.seg)
	dst = binary.BigEndian.AppendUint64(dst, uint64(loc.pos))
	return binary.BigEndian.AppendUint32(dst, uint32(loc.length))
}

// parseBatchLoc reads an index value.
func parseBatchLoc(v []byte) (batchLoc, error) {
	if len(v) != batchLocLen {
		return batchLoc{}, fmt.Errorf("batchlog: segment index entry of %d bytes, not %d", len(v), batchLocLen)
	}
	return batchLoc{seg: binary.BigEndian.Uint32(v), pos: int64(binary.BigEndian.Uint64(v[4:])),
		length: int(binary.BigEndian.Uint32(v[12:]))}, nil
}

// appendCheckpoint appends the checkpoint value (segment seg indexed up to end) to dst.
func appendCheckpoint(dst []byte, seg uint32, end int64) []byte {
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
