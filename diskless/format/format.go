// Package format is the diskless commit log's object format: a commit object's (and a
// checkpoint's) header, entries and CRC, encoded and decoded, and the keys the objects go
// under. It does no I/O; package diskless builds, PUTs and reads the objects. Its tests and
// FuzzDecode are package diskless's (object_test.go), whose seeds take diskless's state
// encodings.
package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"inlet/wire"
)

// A commit object, written once under its key (LogKey) and never changed:
//
//	header   magic "ILDL" (4), version u16 (2), reserved u16 (0), writer epoch u64,
//	         incarnation u64 (random per process start), sequence u64, node id i32,
//	         entry count u32, after u64 (the object this one follows)     48 bytes
//	entries  topic id [16], partition i32, base offset i64, length u32,   32 bytes each
//	         then the record batch as the log stores it (its base offset and leader epoch set);
//	         or (version 2) a state entry: topic id zero, partition -kind (StateGroupOffsets..
//	         StateGroupRecords, StateLogStart; in a checkpoint also StatePartition,
//	         StateCheckpoint), base offset 0, length u32,
//	         then the entry's payload (state.go, checkpoint.go)
//	trailer  CRC-32C (Castagnoli) of every byte before it, u32
//
// Integers are big-endian. An entry's batch is the producer's bytes with the offsets the log
// assigned: a restore appends it unchanged at that offset, and the batch's own CRC still
// checks (it covers bytes 21..end, which the log never changes for a diskless topic: no
// LogAppendTime stamp is set after the copy is taken). Version 1 objects (no state entries)
// are read as before; a writer writes version 2.
const (
	Magic          = "ILDL"
	CurrentVersion = 2
	HeaderLen      = 48
	EntryLen       = 32
	TrailerLen     = 4
)

// Castagnoli is the CRC-32C table of the trailer and of every record batch.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a commit object's header.
type Header struct {
	Version     uint16 // 1 or 2; seal writes version when 0
	Epoch       uint64 // the writer's epoch (the prefix's lease; 0 until one is held)
	Incarnation uint64 // random per writer process: tells its own objects from another's
	Sequence    uint64 // the object's number, as in its key
	Node        int32
	Entries     uint32
	// After is the number of the object this one follows in its writer's log: Sequence-1,
	// except for a writer's first object after it skipped a stale writer's (an object of an
	// older epoch that landed after this writer took the prefix): the objects between After
	// and Sequence are void, and a restore never reads them.
	After uint64
}

// Entry is one batch of a commit object, or a state entry (State set, Partition the negative
// kind, TopicID and Base zero). Batch and State alias the decoded object.
type Entry struct {
	TopicID   [16]byte
	Partition int32
	Base      int64
	Batch     []byte
	State     []byte
}

// The kinds of state entry; an entry's partition field is -kind. StateGroupOffsets: a
// consumer group's offset commit, offset deletion or group deletion (state.go);
// StateTenants: the run-time users, ACLs and quotas (tenants.json), whole; StateBrokerConfigs:
// one level's dynamic broker configs, whole (node_state.go); StateTxn: a transactional id's
// record, whole, or its removal (txn_state.go); StateProducerIDs: the end of a block of
// producer ids reserved before any id of it is handed out (node_state.go); StateGroupRecords:
// a change of a group's records (group_records.go).
const (
	StateGroupOffsets  = 1
	StateTenants       = 2
	StateBrokerConfigs = 3
	StateTxn           = 4
	StateProducerIDs   = 5
	StateGroupRecords  = 6
	LastStateKind      = StateGroupRecords
)

// The kinds of entry only a checkpoint holds (after the commit log's; package diskless's
// checkpoint.go).
const (
	StatePartition  = LastStateKind + 1
	StateCheckpoint = LastStateKind + 2
)

// StateLogStart: a diskless partition's log start moved by DeleteRecords (log_start.go). A
// commit log's kind numbered after the checkpoint's, which were numbered before it was added.
const StateLogStart = StateCheckpoint + 1

// LogKind reports whether kind is a state entry of the commit log (not a checkpoint's own).
func LogKind(kind int32) bool {
	return kind >= StateGroupOffsets && kind <= LastStateKind || kind == StateLogStart
}

// AppendState adds a state entry of kind to an object begun by NewObject.
func AppendState(obj []byte, kind int32, payload []byte) []byte {
	obj = append(obj, make([]byte, 16)...)
	obj = binary.BigEndian.AppendUint32(obj, uint32(-kind))
	obj = binary.BigEndian.AppendUint64(obj, 0)
	obj = binary.BigEndian.AppendUint32(obj, uint32(len(payload)))
	return append(obj, payload...)
}

// LogPrefix holds the commit objects: LogKey(n) for n = 1, 2, ...; the keys sort by number.
const LogPrefix = "diskless/log/"

// LogKey is commit object n's key.
func LogKey(n uint64) string { return fmt.Sprintf("%s%020d", LogPrefix, n) }

// ParseLogKey gives the number of a commit object's key.
func ParseLogKey(key string) (uint64, bool) { return ParseNumbered(LogPrefix, key) }

// ParseNumbered gives the number of a key of prefix (LogPrefix, CheckpointPrefix) followed by
// 20 digits (commit objects, checkpoints); false for any other key, and for number 0.
func ParseNumbered(prefix, key string) (uint64, bool) {
	if len(key) != len(prefix)+20 || !strings.HasPrefix(key, prefix) {
		return 0, false
	}
	var n uint64
	for _, c := range key[len(prefix):] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n > 0
}

// NewObject starts an object's bytes: the header's room, filled by seal.
func NewObject(dst []byte) []byte { return append(dst[:0], make([]byte, HeaderLen)...) }

// AppendEntry adds one batch at base to an object begun by NewObject.
func AppendEntry(obj []byte, topic [16]byte, partition int32, base int64, batch []byte) []byte {
	return append(AppendEntryHead(obj, topic, partition, base, len(batch)), batch...)
}

// AppendEntryHead adds the head of an entry whose n bytes of batch follow it.
func AppendEntryHead(obj []byte, topic [16]byte, partition int32, base int64, n int) []byte {
	obj = append(obj, topic[:]...)
	obj = binary.BigEndian.AppendUint32(obj, uint32(partition))
	obj = binary.BigEndian.AppendUint64(obj, uint64(base))
	return binary.BigEndian.AppendUint32(obj, uint32(n))
}

// Seal writes h into the object's header and appends the trailer.
func Seal(obj []byte, h Header) []byte {
	writeHeader(obj, h)
	return binary.BigEndian.AppendUint32(obj, crc32.Checksum(obj, Castagnoli))
}

// SealSum is seal for an object whose entries' CRC-32C (of the n bytes past the header, some
// of them held apart from obj: object.refs) is sum, kept by entrySum as they were added: only
// the header is read again.
func SealSum(obj []byte, h Header, sum uint32, n int64) []byte {
	writeHeader(obj, h)
	return binary.BigEndian.AppendUint32(obj, CRCCombine(crc32.Checksum(obj[:HeaderLen], Castagnoli), sum, int(n)))
}

// BodySum is the CRC-32C of a whole sealed object, its trailer included, from its trailer
// alone (its last TrailerLen bytes, the CRC-32C of all before them): the checksum its PUT
// sends (objstore.Checksummed).
func BodySum(obj []byte) uint32 {
	t := obj[len(obj)-TrailerLen:]
	return crc32.Update(binary.BigEndian.Uint32(t), Castagnoli, t)
}

func writeHeader(obj []byte, h Header) {
	copy(obj, Magic)
	v := h.Version
	if v == 0 {
		v = CurrentVersion
	}
	binary.BigEndian.PutUint16(obj[4:], v)
	binary.BigEndian.PutUint16(obj[6:], 0)
	binary.BigEndian.PutUint64(obj[8:], h.Epoch)
	binary.BigEndian.PutUint64(obj[16:], h.Incarnation)
	binary.BigEndian.PutUint64(obj[24:], h.Sequence)
	binary.BigEndian.PutUint32(obj[32:], uint32(h.Node))
	binary.BigEndian.PutUint32(obj[36:], h.Entries)
	binary.BigEndian.PutUint64(obj[40:], h.After)
}

// EntrySum continues sum, the CRC-32C of an object's entries so far, over one entry: its head
// and its batch. A record batch carries the CRC-32C of its bytes from
// 21 (attributes) to its end, which the produce path checked (wire.ValidateProduceBatch) and
// the log keeps true (it changes only the base offset and leader epoch, before 21, or stamps
// LogAppendTime and computes the CRC again): that CRC is combined in rather than the bytes
// read a second time, which was most of the CPU of sealing an object. A batch of fewer than
// combineMin bytes is read: the combination costs more than that.
func EntrySum(sum uint32, head, batch []byte) uint32 {
	const crcFrom, crcAt = 21, 17
	sum = crc32.Update(sum, Castagnoli, head)
	if len(batch) < crcFrom+combineMin {
		return crc32.Update(sum, Castagnoli, batch)
	}
	sum = crc32.Update(sum, Castagnoli, batch[:crcFrom])
	return CRCCombine(sum, binary.BigEndian.Uint32(batch[crcAt:]), len(batch)-crcFrom)
}

const combineMin = 4 << 10

// CRCCombine is the CRC-32C of a followed by b, from the CRC-32C of each and b's length
// (zlib's crc32_combine, with the Castagnoli polynomial): crc(a) times x^(8 len(b)), modulo
// the polynomial, plus crc(b). About 30 carry-less steps per set bit of len(b).
func CRCCombine(crcA, crcB uint32, lenB int) uint32 {
	return mulModP(xPow8n(uint64(lenB)), crcA) ^ crcB
}

const castagnoliReversed = 0x82f63b78

// mulModP is a times b modulo the Castagnoli polynomial, bit-reversed as the CRC keeps them
// (zlib's multmodp); a is not zero.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow2k[k] is x^(2^k) modulo the polynomial.
var xPow2k = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulModP(t[k-1], t[k-1])
	}
	return t
}()

// xPow8n is x^(8n) modulo the polynomial: n bytes of zeros appended to a CRC's message.
func xPow8n(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(xPow2k[k], p)
		}
	}
	return p
}

var errBadObject = errors.New("diskless: not a commit object")

// Decode checks a whole commit object and returns its header and entries, whose batches alias
// b. It accepts only what seal, appendEntry and appendState write: the CRC, magic and version
// (1 or 2) must match, the entries must fill the object exactly and number Entries, each batch
// must be a record batch whose length field spans it and whose base offset is the entry's, and
// a state entry (version 2 only) must be of a known kind with a zero topic id and base.
func Decode(b []byte) (Header, []Entry, error) {
	var h Header
	if len(b) < HeaderLen+TrailerLen {
		return h, nil, errBadObject
	}
	body := b[:len(b)-TrailerLen]
	if crc32.Checksum(body, Castagnoli) != binary.BigEndian.Uint32(b[len(body):]) {
		return h, nil, fmt.Errorf("diskless: commit object CRC mismatch")
	}
	return decodeChecked(b)
}

// decodeChecked is Decode past the CRC.
func decodeChecked(b []byte) (Header, []Entry, error) {
	var h Header
	if len(b) < HeaderLen+TrailerLen {
		return h, nil, errBadObject
	}
	body := b[:len(b)-TrailerLen]
	v := binary.BigEndian.Uint16(body[4:])
	if string(body[:4]) != Magic || v < 1 || v > CurrentVersion {
		return h, nil, errBadObject
	}
	h = Header{Version: v, Epoch: binary.BigEndian.Uint64(body[8:]), Incarnation: binary.BigEndian.Uint64(body[16:]),
		Sequence: binary.BigEndian.Uint64(body[24:]), Node: int32(binary.BigEndian.Uint32(body[32:])),
		Entries: binary.BigEndian.Uint32(body[36:]), After: binary.BigEndian.Uint64(body[40:])}
	if h.After >= h.Sequence {
		return h, nil, fmt.Errorf("diskless: commit object %d follows %d", h.Sequence, h.After)
	}
	minEntry := EntryLen + wire.RecordBatchOverhead
	if v >= 2 {
		minEntry = EntryLen // a state entry may be empty
	}
	if uint64(h.Entries) > uint64(len(body)-HeaderLen)/uint64(minEntry) {
		return h, nil, fmt.Errorf("diskless: commit object claims %d entries in %d bytes", h.Entries, len(b))
	}
	entries := make([]Entry, 0, h.Entries)
	pos := HeaderLen
	for i := uint32(0); i < h.Entries; i++ {
		if len(body)-pos < EntryLen {
			return h, nil, fmt.Errorf("diskless: commit object entry %d cut short", i)
		}
		var e Entry
		copy(e.TopicID[:], body[pos:])
		e.Partition = int32(binary.BigEndian.Uint32(body[pos+16:]))
		e.Base = int64(binary.BigEndian.Uint64(body[pos+20:]))
		n := int(binary.BigEndian.Uint32(body[pos+28:]))
		pos += EntryLen
		if n > len(body)-pos {
			return h, nil, fmt.Errorf("diskless: commit object entry %d of %d bytes past the end", i, n)
		}
		if e.Partition < 0 && v >= 2 {
			if e.Partition < -StateLogStart || e.TopicID != ([16]byte{}) || e.Base != 0 {
				return h, nil, fmt.Errorf("diskless: commit object entry %d is not a known state entry", i)
			}
			e.State = body[pos : pos+n : pos+n]
			pos += n
			entries = append(entries, e)
			continue
		}
		e.Batch = body[pos : pos+n : pos+n]
		pos += n
		bh, err := wire.ParseBatchHeader(e.Batch)
		if err != nil || int(bh.BatchLength)+12 != n || bh.BaseOffset != e.Base || e.Partition < 0 || e.Base < 0 {
			return h, nil, fmt.Errorf("diskless: commit object entry %d is not a batch at %d", i, e.Base)
		}
		entries = append(entries, e)
	}
	if pos != len(body) {
		return h, nil, fmt.Errorf("diskless: commit object has %d bytes after its entries", len(body)-pos)
	}
	return h, entries, nil
}
