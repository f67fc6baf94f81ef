package loadgen

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A record value is
//
//	bytes 0..3   producer index, uint32 big endian
//	bytes 4..11  sequence number within that producer, uint64 big endian, dense from 0
//	bytes 12..   padding up to the configured record size
//
// The (producer, sequence) pair names every record of a run uniquely, so the verifier can find
// lost and duplicated records without keeping anything per record but one bit. The key is nil:
// a key would force hash partitioning and add bytes to every record without testing anything
// the value does not.
const ValueHeaderSize = 12

// Padding is the same for every record of a given size. It is pseudo-random rather than a short
// repeating pattern so that one record on its own does not compress; across a batch the codecs
// still find the repeats, so compressed figures are best cases, not typical ones.
func Padding(recordSize int) []byte {
	if recordSize <= ValueHeaderSize {
		return nil
	}
	pad := make([]byte, recordSize-ValueHeaderSize)
	// splitmix64 with a fixed seed: deterministic across runs and machines, so a verifier in
	// another process recognises the padding.
	var state uint64 = 0x696e6c6574 // "inlet"
	for i := 0; i < len(pad); i += 8 {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		var word [8]byte
		binary.LittleEndian.PutUint64(word[:], z)
		copy(pad[i:], word[:])
	}
	return pad
}

// NewValue returns a whole record value of recordSize bytes for (producer, seq).
func NewValue(recordSize int, producer uint32, seq uint64) []byte {
	v := make([]byte, recordSize)
	copy(v[ValueHeaderSize:], Padding(recordSize))
	PutValueHeader(v, producer, seq)
	return v
}

// PutValueHeader overwrites the header of a value whose padding is already in place; the
// producers reuse value buffers and rewrite only these 12 bytes per record.
func PutValueHeader(v []byte, producer uint32, seq uint64) {
	binary.BigEndian.PutUint32(v[0:4], producer)
	binary.BigEndian.PutUint64(v[4:12], seq)
}

// Value formats (Config.ValueFormat).
const (
	FormatRaw  = "raw"  // the layout above
	FormatAvro = "avro" // Confluent wire format around an Avro LoadRecord (avro.go)
)

// ValueFormats are the accepted Config.ValueFormat values.
var ValueFormats = []string{FormatRaw, FormatAvro}

// values makes the record values of a run in its format. It is read-only once made, so the
// producers share one.
type values struct {
	size    int
	padding []byte       // raw
	avro    *AvroEncoder // avro; nil for raw
}

func newValues(format string, recordSize int, schemaID int32) *values {
	if format == FormatAvro {
		return &values{size: recordSize, avro: NewAvroEncoder(recordSize, schemaID)}
	}
	return &values{size: recordSize, padding: Padding(recordSize)}
}

// buffer returns a value buffer for put: raw ones start with their padding in place.
func (vs *values) buffer() []byte {
	b := make([]byte, vs.size)
	copy(b[min(ValueHeaderSize, vs.size):], vs.padding)
	return b
}

// put writes the value of (producer, seq) into buf, a buffer from buffer, and returns it. Raw
// values rewrite only their 12-byte header; Avro values are rewritten whole, since the widths
// of the varints (and so the note's length) change with the sequence number. Neither
// allocates.
func (vs *values) put(buf []byte, producer uint32, seq uint64) []byte {
	if vs.avro != nil {
		return vs.avro.Append(buf[:0], producer, seq)
	}
	PutValueHeader(buf, producer, seq)
	return buf
}

// Decoder reads the producer and sequence number back from a value; an error wraps
// ErrMalformedValue. ValueDecoder (raw) and AvroDecoder implement it.
type Decoder interface {
	Decode(v []byte) (producer uint32, seq uint64, err error)
}

// NewDecoder returns the decoder of values written in format (FormatRaw or FormatAvro).
func NewDecoder(format string, recordSize int, schemaID int32) Decoder {
	if format == FormatAvro {
		return NewAvroDecoder(recordSize, schemaID)
	}
	return NewValueDecoder(recordSize)
}

// ErrMalformedValue is wrapped by every Decoder error.
var ErrMalformedValue = errors.New("malformed record value")

// ValueDecoder checks values against one record size; it holds the expected padding so that
// decoding allocates nothing.
type ValueDecoder struct {
	size    int
	padding []byte
}

// NewValueDecoder returns a decoder for values written with this record size.
func NewValueDecoder(recordSize int) *ValueDecoder {
	return &ValueDecoder{size: recordSize, padding: Padding(recordSize)}
}

// Decode returns the producer and sequence of v. A value of the wrong length or with altered
// padding is malformed: the broker stores the producer's bytes unchanged, so any difference is
// corruption (or a record some other writer put in the topic).
func (d *ValueDecoder) Decode(v []byte) (producer uint32, seq uint64, err error) {
	if len(v) != d.size {
		return 0, 0, fmt.Errorf("%w: %d bytes, want %d", ErrMalformedValue, len(v), d.size)
	}
	if string(v[ValueHeaderSize:]) != string(d.padding) {
		return 0, 0, fmt.Errorf("%w: padding differs", ErrMalformedValue)
	}
	return binary.BigEndian.Uint32(v[0:4]), binary.BigEndian.Uint64(v[4:12]), nil
}
