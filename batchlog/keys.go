package batchlog

import (
	"encoding/binary"

	"inlet/batchlog/segments"
	"inlet/meta"
)

// Key layout of the log's own keys, in the Pebble database it shares with the catalog (package
// meta: t, o, g, x, and m keys other than m lay). Every key starts with a one-byte kind so the
// kinds never interleave and each can be scanned alone at startup. Integers are big-endian so
// byte order is numeric order.
//
//	d <partition u32> <base offset u64>   record batch, exactly as the producer sent it except baseOffset
//	                                      (segments layout: the batch's place in its segment, segments/index.go)
//	h <partition u32>                     next offset (high watermark) u64, log start offset u64
//	p <producer id u64> <partition u32>   idem.State encoding
//	m lay                                 the record-data layout the directory holds
//	m ckpt                                the segments' checkpoint (segments/segment.go)
//	l <partition u32>                     log start offset u64 (retention, DeleteRecords)
//	r <partition u32>                     relocated below u64: batches under it may have been copied forward (reclaim.go)
//	a <partition u32> <marker offset u64> an aborted transaction: producer id u64, first offset u64 (txn.go)
//	c <partition u32>                     compacted up to u64: the dirty part of a compacted partition starts there (upkeep/compact.go)
//	L <partition u32>                     local log start u64: batches below it are no longer on this node (Pass.AdvanceLocalStart)
const (
	kindData     = segments.KindData
	kindHigh     = 'h'
	kindProducer = 'p'
	kindMeta     = 'm'
	kindLogStart = 'l'
	kindRelocate = 'r'
	kindAborted  = 'a'
	kindCleaned  = 'c'
	kindLocal    = 'L'
)

// The data key, and the segments' checkpoint key, are encoded by package segments (index.go).
const dataKeyLen = segments.DataKeyLen

func putDataKey(dst []byte, partition uint32, baseOffset int64) {
	segments.PutDataKey(dst, partition, baseOffset)
}

func dataKey(partition uint32, baseOffset int64) []byte {
	return segments.DataKey(partition, baseOffset)
}

func dataKeyOffset(k []byte) int64 { return segments.DataKeyOffset(k) }

const highKeyLen = 1 + 4

// partKey appends to dst a partition's key of kind (h, l, r, c, L): the kind, the partition.
func partKey(dst []byte, kind byte, partition uint32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, kind), partition)
}

const producerKeyLen = 1 + 8 + 4

func putProducerKey(dst []byte, producerID int64, partition uint32) {
	dst[0] = kindProducer
	binary.BigEndian.PutUint64(dst[1:], uint64(producerID))
	binary.BigEndian.PutUint32(dst[9:], partition)
}

var (
	metaLayout     = []byte{kindMeta, 'l', 'a', 'y'}
	metaCheckpoint = segments.CheckpointKey
)

// prefixEnd and quoteKey are the catalog's (meta.PrefixEnd, meta.QuoteKey): one key
// layout's helpers for both.
func prefixEnd(prefix []byte) []byte { return meta.PrefixEnd(prefix) }
func quoteKey(k []byte) string       { return meta.QuoteKey(k) }

// skipBadKey logs a metadata key that does not decode and is skipped at start-up. Only keys
// that are not record data are skipped: of the log's, compacted-to marks (the next compaction
// pass redoes the work); the catalog skips its own (meta.Store). A bad key of a partition's log state (high watermarks, log starts, producer
// windows, the batch index, the aborted-transaction index) still stops start-up: skipping it
// would change what a reader sees of the records.
func (l *Log) skipBadKey(what string, k []byte, err error) {
	l.log.Error("batchlog: skipping a stored "+what+" that does not decode", "key", quoteKey(k), "err", err)
}
