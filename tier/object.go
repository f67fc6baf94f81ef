package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// The object format. An object holds one partition's stored batches as the log stores them
// (Kafka's record batch v2, base offsets in place), back to back, then an index footer of one
// entry per batch, then a fixed trailer:
//
//	batches   the record batches, in offset order
//	entries   per batch: base offset i64, last offset delta i32, position u32 (from the
//	          object's start), size u32, max timestamp i64, attributes u16, zero u16 (32 bytes)
//	trailer   entry count u32, CRC-32C of the entries u32, data length u64, magic "INLTIER1"
//
// A read names the batches it wants from the footer (cached) and takes them with one ranged
// GET. The footer's place is in the object's record (meta.RemoteObject.DataLen); a node
// rebuilt from the bucket finds it from the trailer, the object's last 24 bytes.

const (
	entryLen   = 32
	trailerLen = 24
	magic      = "INLTIER1"
)

// maxObjectBytes bounds an object's data: positions are 32-bit.
const maxObjectBytes = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is one batch of an object's footer.
type entry struct {
	base         int64
	lastDelta    int32
	pos, size    uint32
	maxTimestamp int64
	attrs        uint16 // the batch's attributes (wire.BatchHeader.Attributes)
}

// control reports whether the batch is a control batch (a transaction marker).
func (e entry) control() bool { return e.attrs&0x20 != 0 }

// end is the offset after the batch.
func (e entry) end() int64 { return e.base + int64(e.lastDelta) + 1 }

func appendEntry(dst []byte, e entry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.base))
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.lastDelta))
	dst = binary.BigEndian.AppendUint32(dst, e.pos)
	dst = binary.BigEndian.AppendUint32(dst, e.size)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.maxTimestamp))
	dst = binary.BigEndian.AppendUint16(dst, e.attrs)
	return binary.BigEndian.AppendUint16(dst, 0)
}

// appendTrailer appends the trailer of the footer entries (already in dst from entriesAt)
// of an object with dataLen bytes of batches.
func appendTrailer(dst []byte, entriesAt int, dataLen int64) []byte {
	entries := dst[entriesAt:]
	n := len(entries) / entryLen
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(entries, castagnoli))
	dst = binary.BigEndian.AppendUint64(dst, uint64(dataLen))
	return append(dst, magic...)
}

var errBadFooter = errors.New("tier: object footer does not decode")

// parseTrailer reads an object's trailer: its entry count and data length.
func parseTrailer(b []byte) (n int, dataLen int64, crc uint32, err error) {
	if len(b) != trailerLen || string(b[16:]) != magic {
		return 0, 0, 0, errBadFooter
	}
	n = int(binary.BigEndian.Uint32(b))
	crc = binary.BigEndian.Uint32(b[4:])
	dataLen = int64(binary.BigEndian.Uint64(b[8:]))
	if n <= 0 || dataLen <= 0 || dataLen > maxObjectBytes || int64(n)*61 > dataLen {
		return 0, 0, 0, errBadFooter
	}
	return n, dataLen, crc, nil
}

// parseFooter decodes an object's footer (its entries and trailer, the bytes from DataLen to
// the end): the entries in offset order, each batch inside the data and after the one before.
func parseFooter(b []byte) ([]entry, int64, error) {
	if len(b) < trailerLen {
		return nil, 0, errBadFooter
	}
	n, dataLen, crc, err := parseTrailer(b[len(b)-trailerLen:])
	if err != nil {
		return nil, 0, err
	}
	raw := b[:len(b)-trailerLen]
	if len(raw) != n*entryLen || crc32.Checksum(raw, castagnoli) != crc {
		return nil, 0, errBadFooter
	}
	out := make([]entry, n)
	next, pos := int64(-1), uint32(0)
	for i := range out {
		e := raw[i*entryLen:]
		out[i] = entry{
			base:         int64(binary.BigEndian.Uint64(e)),
			lastDelta:    int32(binary.BigEndian.Uint32(e[8:])),
			pos:          binary.BigEndian.Uint32(e[12:]),
			size:         binary.BigEndian.Uint32(e[16:]),
			maxTimestamp: int64(binary.BigEndian.Uint64(e[20:])),
			attrs:        binary.BigEndian.Uint16(e[28:]),
		}
		en := out[i]
		if binary.BigEndian.Uint16(e[30:]) != 0 || en.base < 0 || en.lastDelta < 0 || en.base < next || en.pos != pos || en.size < 61 ||
			int64(en.pos)+int64(en.size) > dataLen {
			return nil, 0, errBadFooter
		}
		next, pos = en.end(), en.pos+en.size
	}
	if int64(pos) != dataLen {
		return nil, 0, errBadFooter
	}
	return out, dataLen, nil
}

// Object keys, below the bucket's prefix:
//
//	<topic>/<topic id, hex>/<partition>/<base offset, 20 digits>-<end offset, 20 digits>[-e<epoch, 20 digits>]
//	<topic>/<topic id, hex>/topic-<sequence, 20 digits>[-e<epoch, 20 digits>].json
//	                         the topic's description, for a node rebuilt from the bucket
//
// The epoch is the writer's (package lease) when the node holds the prefix's lease; keys
// without one (epoch 0) were written before the lease existed, or by a node given no lease,
// and still read. A clean never deletes a key of a newer epoch than its own, and a restore
// takes, where objects overlap, the newest epoch's, and never an older epoch's object after a
// newer one's (written by a node that had lost the prefix).
//
// A description is replaced by writing the next one before deleting the last (a conditional PUT
// cannot overwrite), so one always exists; the one in force is the newest epoch's, and within
// an epoch the one with the highest sequence (newerDescription).
//
// Kafka's topic names are [a-zA-Z0-9._-], safe in a key; the topic id keeps a deleted topic's
// objects apart from a new topic of the same name.
func objectKey(topic string, id [16]byte, partition int32, base, end int64, epoch uint64) string {
	if epoch == 0 {
		return fmt.Sprintf("%s/%x/%d/%020d-%020d", topic, id, partition, base, end)
	}
	return fmt.Sprintf("%s/%x/%d/%020d-%020d-e%020d", topic, id, partition, base, end, epoch)
}

func descriptionKey(topic string, id [16]byte, seq int64) string {
	return descriptionKeyEpoch(topic, id, seq, 0)
}

func descriptionKeyEpoch(topic string, id [16]byte, seq int64, epoch uint64) string {
	if epoch == 0 {
		return fmt.Sprintf("%s/%x/topic-%020d.json", topic, id, seq)
	}
	return fmt.Sprintf("%s/%x/topic-%020d-e%020d.json", topic, id, seq, epoch)
}

// parseDescriptionKey takes a description's key apart: its "<topic>/<id>", sequence and epoch.
func parseDescriptionKey(key string) (topicID string, seq int64, epoch uint64, ok bool) {
	dir, file, found := strings.Cut(key, "/topic-")
	if !found || strings.Count(dir, "/") != 1 {
		return "", 0, 0, false
	}
	file, found = strings.CutSuffix(file, ".json")
	if !found {
		return "", 0, 0, false
	}
	seqs, eps, withEpoch := strings.Cut(file, "-e")
	if len(seqs) != 20 || withEpoch && len(eps) != 20 {
		return "", 0, 0, false
	}
	seq, err := strconv.ParseInt(seqs, 10, 64)
	if err != nil || seq < 0 {
		return "", 0, 0, false
	}
	if withEpoch {
		if epoch, err = strconv.ParseUint(eps, 10, 64); err != nil || epoch == 0 {
			return "", 0, 0, false
		}
	}
	return dir, seq, epoch, true
}

// newerDescription reports whether description key a is in force over b (both parse): the
// newer epoch, then the higher sequence.
func newerDescription(a, b string) bool {
	_, sa, ea, _ := parseDescriptionKey(a)
	_, sb, eb, _ := parseDescriptionKey(b)
	if ea != eb {
		return ea > eb
	}
	return sa > sb
}

// parsedKey is an object key taken apart.
type parsedKey struct {
	topic     string
	id        string // hex
	partition int32
	base, end int64
	epoch     uint64 // 0: written without a lease
}

// parseObjectKey takes an object key apart; ok is false for a key that is not an object's
// (a description, or anything else under the prefix).
func parseObjectKey(key string) (k parsedKey, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return k, false
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil || p < 0 {
		return k, false
	}
	be := strings.Split(parts[3], "-")
	if len(be) != 2 && len(be) != 3 || len(be[0]) != 20 || len(be[1]) != 20 {
		return k, false
	}
	base, err1 := strconv.ParseInt(be[0], 10, 64)
	end, err2 := strconv.ParseInt(be[1], 10, 64)
	if err1 != nil || err2 != nil || base < 0 || end <= base {
		return k, false
	}
	var epoch uint64
	if len(be) == 3 {
		e, found := strings.CutPrefix(be[2], "e")
		if !found || len(e) != 20 {
			return k, false
		}
		if epoch, err = strconv.ParseUint(e, 10, 64); err != nil || epoch == 0 {
			return k, false
		}
	}
	return parsedKey{topic: parts[0], id: parts[1], partition: int32(p), base: base, end: end, epoch: epoch}, true
}
