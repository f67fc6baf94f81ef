package loadgen

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// Avro values (--value-format avro) are what a Confluent serializer writes: Confluent's wire
// format around the Avro binary encoding (Avro specification, "Binary Encoding") of a
// LoadRecord, the schema in examples/loadgen-value.avsc:
//
//	byte  0      magic byte 0
//	bytes 1..4   schema id, int32 big endian
//	producer     long: zig-zag varint of the producer index
//	seq          long: zig-zag varint of the sequence number
//	amount       double: 8 bytes, IEEE 754 little endian; seq/100
//	note         string: zig-zag varint length n, then n bytes of fixed ASCII text
//
// Every value is exactly the record size: the note takes every byte the other fields leave,
// so n = size - 13 - len(producer) - len(seq) - len(length prefix). The length prefix is the
// shortest varint of n, except where no n fits with a minimal prefix: when size - 13 -
// len(producer) - len(seq) is 65, 8194, 1048579, ... (one past the largest n with a 1-, 2-,
// 3-byte prefix plus that prefix), the prefix is one byte longer than minimal, written with a
// continuation bit on a zero group. Avro decoders read such a varint as the same number (the
// Java BinaryDecoder, hamba/avro, Inlet's validator; TestAvroValueOverlongPrefix checks the
// last two); at the default 100 bytes it never happens.
//
// The producer's varint is 1 byte for the first 64 producers; the sequence number's grows
// from 1 to 5 bytes as it passes 64, 8192, 2^20 and 2^27, and the note shrinks to match.
const (
	// avroHeaderSize is the Confluent wire-format header: magic byte and schema id.
	avroHeaderSize = 5
	// AvroMinRecordSize holds the widest value with an empty note: the header, two 5-byte
	// varints (a producer index below 2^32 and a sequence number below BitmapCapacity = 2^34
	// are below 2^35 after zig-zag), the double and a 1-byte note length.
	AvroMinRecordSize = avroHeaderSize + 5 + 5 + 8 + 1
)

// AvroEncoder writes Avro values of one record size and schema id. It is read-only once made,
// so the producers of a run share one.
type AvroEncoder struct {
	size     int
	schemaID int32
	note     []byte // the longest note a value of this size can carry; shorter notes are prefixes
}

// NewAvroEncoder returns the encoder of recordSize-byte values under schemaID. recordSize must
// be at least AvroMinRecordSize (Config checks it).
func NewAvroEncoder(recordSize int, schemaID int32) *AvroEncoder {
	if recordSize < AvroMinRecordSize {
		panic(fmt.Sprintf("BUG: loadgen: Avro record size %d below the minimum %d", recordSize, AvroMinRecordSize))
	}
	return &AvroEncoder{size: recordSize, schemaID: schemaID, note: noteText(recordSize - avroHeaderSize - 1 - 1 - 8 - 1)}
}

// noteAlphabet is 64 characters, so a byte of the generator picks one with its low 6 bits.
const noteAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ."

// noteText is n bytes of ASCII (valid UTF-8, as an Avro string must be) from the same
// deterministic generator as the raw padding, so a value does not compress on its own.
func noteText(n int) []byte {
	note := Padding(n + ValueHeaderSize)
	for i, b := range note {
		note[i] = noteAlphabet[b&63]
	}
	return note
}

// avroAmount is the amount field of sequence number seq.
func avroAmount(seq uint64) float64 { return float64(seq) / 100 }

// Append appends the value of (producer, seq) to dst and returns it; with cap(dst)-len(dst) at
// least the record size it does not allocate. seq must be below 2^63 (Run stops producers at
// BitmapCapacity).
func (e *AvroEncoder) Append(dst []byte, producer uint32, seq uint64) []byte {
	start := len(dst)
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.schemaID))
	// Both are non-negative, so their zig-zag form is just twice the number.
	dst = binary.AppendUvarint(dst, uint64(producer)<<1)
	dst = binary.AppendUvarint(dst, seq<<1)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(avroAmount(seq)))
	n, width := noteLength(e.size - (len(dst) - start))
	dst = appendVarintWidth(dst, uint64(n)<<1, width)
	return append(dst, e.note[:n]...)
}

// noteLength splits rest, the bytes left for the note's length prefix and text, into the text
// length n and the prefix width: the narrowest prefix that holds n's varint, wider than it
// only where no width fits exactly (see the format comment).
func noteLength(rest int) (n, width int) {
	for width = 1; ; width++ {
		n = rest - width
		if n < 0 {
			panic(fmt.Sprintf("BUG: loadgen: no room for the Avro note (%d bytes left)", rest))
		}
		if uvarintLen(uint64(n)<<1) <= width {
			return n, width
		}
	}
}

// uvarintLen is the length of the minimal varint of x.
func uvarintLen(x uint64) int { return max(1, (bits.Len64(x)+6)/7) }

// appendVarintWidth appends x as a varint of exactly width bytes: minimal if x needs width
// bytes, else with continuation bits on trailing zero groups. x must fit 7*width bits.
func appendVarintWidth(dst []byte, x uint64, width int) []byte {
	for i := 1; i < width; i++ {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

// AvroDecoder checks Avro values against one record size and schema id. It keeps a scratch
// value, so decoding allocates nothing; it is not safe for concurrent use.
type AvroDecoder struct {
	enc     *AvroEncoder
	scratch []byte
}

// NewAvroDecoder returns a decoder for values written by NewAvroEncoder(recordSize, schemaID).
func NewAvroDecoder(recordSize int, schemaID int32) *AvroDecoder {
	return &AvroDecoder{enc: NewAvroEncoder(recordSize, schemaID), scratch: make([]byte, 0, recordSize)}
}

// Decode returns the producer and sequence of v. It reads them from the two varints and then
// compares v with the value the encoder writes for them: a wrong length, magic byte or schema
// id, an amount or note that differs, or a non-minimal producer or sequence varint are all
// malformed, since the broker stores a producer's bytes unchanged.
func (d *AvroDecoder) Decode(v []byte) (producer uint32, seq uint64, err error) {
	switch {
	case len(v) != d.enc.size:
		return 0, 0, fmt.Errorf("%w: %d bytes, want %d", ErrMalformedValue, len(v), d.enc.size)
	case v[0] != 0:
		return 0, 0, fmt.Errorf("%w: magic byte %d, want 0", ErrMalformedValue, v[0])
	}
	if id := int32(binary.BigEndian.Uint32(v[1:5])); id != d.enc.schemaID {
		return 0, 0, fmt.Errorf("%w: schema id %d, want %d", ErrMalformedValue, id, d.enc.schemaID)
	}
	p, n := binary.Uvarint(v[avroHeaderSize:])
	if n <= 0 || p&1 != 0 || p>>1 > math.MaxUint32 {
		return 0, 0, fmt.Errorf("%w: producer is not a long in [0, %d]", ErrMalformedValue, uint32(math.MaxUint32))
	}
	s, m := binary.Uvarint(v[avroHeaderSize+n:])
	if m <= 0 || s&1 != 0 {
		return 0, 0, fmt.Errorf("%w: seq is not a non-negative long", ErrMalformedValue)
	}
	producer, seq = uint32(p>>1), s>>1
	d.scratch = d.enc.Append(d.scratch[:0], producer, seq)
	if string(v) != string(d.scratch) {
		return 0, 0, fmt.Errorf("%w: amount or note differs", ErrMalformedValue)
	}
	return producer, seq, nil
}
