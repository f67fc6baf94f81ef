package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Produce versions this package speaks. v0..v2 carry the legacy message set
// formats (magic 0/1), which Inlet does not store; v13+ name topics by id
// (KIP-516), which the []byte Name fields below cannot carry.
const (
	MinProduceVersion = 3
	MaxProduceVersion = 12

	// firstFlexibleProduce is the first Produce version with KIP-482
	// compact encodings and tagged fields (ProduceRequest.json
	// "flexibleVersions": "9+").
	firstFlexibleProduce = 9
)

// Smallest encodings of one array element, used to bound array lengths by
// the bytes that remain before a slice is grown. A topic is a name and a
// partition array (plus an empty tag section when flexible); a partition is
// an int32 index and a records length (plus tags).
const (
	minTopicLen         = 2 + 4
	minTopicLenFlex     = 1 + 1 + 1
	minPartitionLen     = 4 + 4
	minPartitionLenFlex = 4 + 1 + 1
)

// ProduceRequest is a decoded Produce request body (ProduceRequest.json).
// All byte slices alias the body passed to Decode.
type ProduceRequest struct {
	Version         int16
	TransactionalID []byte // nil when null; aliases input
	Acks            int16
	TimeoutMs       int32
	Topics          []ProduceTopic // reused across Decode calls
}

// ProduceTopic is one topic of a ProduceRequest.
type ProduceTopic struct {
	Name       []byte // aliases input
	Partitions []ProducePartition
}

// ProducePartition is one partition of a ProduceTopic.
type ProducePartition struct {
	Index   int32
	Records []byte // aliases input; nil when null
}

// Decode parses a Produce request body (versions 3..12; v9+ flexible: compact
// arrays, strings and bytes, and tagged fields, which are skipped) into r.
//
// r's slices are reused: once Topics and each topic's Partitions have grown
// to the shape of the traffic, Decode allocates nothing. Everything aliases
// body (see the package comment). Elements past len but within cap keep
// pointing into earlier bodies; zero r to let those be collected.
//
// Truncated or garbage input returns an error, never panics, and never makes
// Decode allocate more than a constant times len(body): each array length is
// checked against the bytes that remain before a slice grows. Trailing bytes
// after the top-level tagged fields are an error, as they are for kmsg
// (kbin.Reader.Complete). On error r holds a partial decode and must not be
// used.
func (r *ProduceRequest) Decode(body []byte, version int16) error {
	if version < MinProduceVersion || version > MaxProduceVersion {
		return fmt.Errorf("wire: produce v%d: %w (want %d..%d)", version, errVersion, MinProduceVersion, MaxProduceVersion)
	}
	flex := version >= firstFlexibleProduce
	minTopic, minPart := minTopicLen, minPartitionLen
	if flex {
		minTopic, minPart = minTopicLenFlex, minPartitionLenFlex
	}

	d := reader{b: body}
	r.Version = version
	r.TransactionalID = d.nullableString(flex)
	r.Acks = d.int16()
	r.TimeoutMs = d.int32()

	nt := d.arrayLen(flex, minTopic)
	r.Topics = grow(r.Topics, nt)
	for i := range r.Topics {
		if d.err != nil {
			break
		}
		t := &r.Topics[i]
		t.Name = d.string(flex)
		np := d.arrayLen(flex, minPart)
		t.Partitions = grow(t.Partitions, np)
		for j := range t.Partitions {
			if d.err != nil {
				break
			}
			p := &t.Partitions[j]
			p.Index = d.int32()
			p.Records = d.nullableBytes(flex)
			if flex {
				d.skipTags()
			}
		}
		if flex {
			d.skipTags()
		}
	}
	if flex {
		d.skipTags()
	}
	if d.err == nil && d.off != len(body) {
		d.fail(errTrailingBytes)
	}
	if d.err != nil {
		return fmt.Errorf("wire: produce v%d at byte %d of %d: %w", version, d.errOff, len(body), d.err)
	}
	return nil
}

// grow returns s resliced to length n, reallocating only when n exceeds its
// capacity. Elements are not cleared: their nested slices are reused by the
// caller, which overwrites every field it reads.
func grow[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	g := make([]T, n)
	copy(g, s[:cap(s)])
	return g
}

// ProduceResponse is a Produce response body (ProduceResponse.json) built by
// the server and encoded with AppendTo. Reuse one per connection: Reset,
// AppendTopic and AppendPartition keep every nested slice's capacity.
type ProduceResponse struct {
	Topics     []ProduceRespTopic
	ThrottleMs int32
}

// ProduceRespTopic is one topic of a ProduceResponse.
type ProduceRespTopic struct {
	Name       []byte
	Partitions []ProduceRespPartition
}

// ProduceRespPartition is one partition's result.
type ProduceRespPartition struct {
	Index           int32
	ErrorCode       int16
	BaseOffset      int64
	LogAppendTime   int64         // v2+; -1 unless the topic uses LogAppendTime
	LogStartOffset  int64         // v5+
	RecordErrors    []RecordError // v8+
	ErrorMessage    string        // v8+ nullable string
	HasErrorMessage bool
}

// RecordError is one entry of RecordErrors (KIP-467): the index of a record
// in the batch that caused the batch to be rejected.
type RecordError struct {
	BatchIndex int32
	Message    string
	HasMessage bool
}

// Reset empties r and keeps capacity.
func (r *ProduceResponse) Reset() {
	r.Topics = r.Topics[:0]
	r.ThrottleMs = 0
}

// AppendTopic appends a topic named name (aliased, not copied) with no
// partitions and returns it. It reuses the slot's Partitions capacity left by
// an earlier response, which a plain append of a ProduceRespTopic literal
// would throw away. The pointer is valid until the next AppendTopic.
func (r *ProduceResponse) AppendTopic(name []byte) *ProduceRespTopic {
	if len(r.Topics) < cap(r.Topics) {
		r.Topics = r.Topics[:len(r.Topics)+1]
	} else {
		r.Topics = append(r.Topics, ProduceRespTopic{})
	}
	t := &r.Topics[len(r.Topics)-1]
	t.Name = name
	t.Partitions = t.Partitions[:0]
	return t
}

// AppendPartition appends a partition result with no error, BaseOffset -1,
// LogAppendTime -1 and LogStartOffset -1 (the defaults of
// ProduceResponse.PartitionResponse) and returns it, reusing the slot's
// RecordErrors capacity. The pointer is valid until the next AppendPartition
// on t.
func (t *ProduceRespTopic) AppendPartition(index int32) *ProduceRespPartition {
	if len(t.Partitions) < cap(t.Partitions) {
		t.Partitions = t.Partitions[:len(t.Partitions)+1]
	} else {
		t.Partitions = append(t.Partitions, ProduceRespPartition{})
	}
	p := &t.Partitions[len(t.Partitions)-1]
	*p = ProduceRespPartition{
		Index:          index,
		BaseOffset:     -1,
		LogAppendTime:  -1,
		LogStartOffset: -1,
		RecordErrors:   p.RecordErrors[:0],
	}
	return p
}

// AppendTo appends the response BODY (not the header) for version v, field
// layout exactly as ProduceResponse.json: v2+ LogAppendTimeMs, v5+
// LogStartOffset, v8+ RecordErrors and ErrorMessage, v9+ flexible,
// ThrottleTimeMs (v1+) after the topics array. Tagged fields are written
// empty, so v10+'s CurrentLeader and NodeEndpoints (KIP-951) are never sent.
//
// AppendTo allocates nothing when dst has room. v outside 0..12 is a caller
// bug (Decode only accepts 3..12) and panics.
func (r *ProduceResponse) AppendTo(dst []byte, v int16) []byte {
	if v < 0 || v > MaxProduceVersion {
		panic(fmt.Sprintf("wire: BUG: ProduceResponse.AppendTo version %d outside 0..%d", v, MaxProduceVersion))
	}
	flex := v >= firstFlexibleProduce
	dst = appendArrayLen(dst, len(r.Topics), flex)
	for i := range r.Topics {
		t := &r.Topics[i]
		dst = appendString(dst, t.Name, flex)
		dst = appendArrayLen(dst, len(t.Partitions), flex)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.Index))
			dst = binary.BigEndian.AppendUint16(dst, uint16(p.ErrorCode))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.BaseOffset))
			if v >= 2 {
				dst = binary.BigEndian.AppendUint64(dst, uint64(p.LogAppendTime))
			}
			if v >= 5 {
				dst = binary.BigEndian.AppendUint64(dst, uint64(p.LogStartOffset))
			}
			if v >= 8 {
				dst = appendArrayLen(dst, len(p.RecordErrors), flex)
				for k := range p.RecordErrors {
					e := &p.RecordErrors[k]
					dst = binary.BigEndian.AppendUint32(dst, uint32(e.BatchIndex))
					dst = appendNullableString(dst, e.Message, e.HasMessage, flex)
					if flex {
						dst = append(dst, 0)
					}
				}
				dst = appendNullableString(dst, p.ErrorMessage, p.HasErrorMessage, flex)
			}
			if flex {
				dst = append(dst, 0)
			}
		}
		if flex {
			dst = append(dst, 0)
		}
	}
	if v >= 1 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.ThrottleMs))
	}
	if flex {
		dst = append(dst, 0)
	}
	return dst
}

func appendUvarint(dst []byte, x uint32) []byte {
	for x >= 0x80 {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

func appendArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return appendUvarint(dst, uint32(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// appendString appends a STRING or COMPACT_STRING. Strings are cut at
// Short.MAX_VALUE bytes, the most a reader accepts in either encoding; only
// an error message could be that long, and a cut message beats a frame the
// client cannot parse.
func appendString[S ~string | ~[]byte](dst []byte, s S, flex bool) []byte {
	if len(s) > math.MaxInt16 {
		s = s[:math.MaxInt16]
	}
	if flex {
		dst = appendUvarint(dst, uint32(len(s))+1)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	}
	return append(dst, s...)
}

func appendNullableString(dst []byte, s string, present, flex bool) []byte {
	if !present {
		if flex {
			return append(dst, 0)
		}
		return append(dst, 0xff, 0xff)
	}
	return appendString(dst, s, flex)
}
