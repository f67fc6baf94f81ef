package wire

import (
	"encoding/binary"
	"errors"
	"math"
)

// Decode failures. They are reported wrapped with the message and byte
// offset; every one of them means the frame is garbage, so the server closes
// the connection (there is no way to resynchronise a Kafka stream).
var (
	errTruncated      = errors.New("truncated")
	errNegativeLength = errors.New("negative length")
	errNull           = errors.New("null in a non-nullable field")
	errVarintOverflow = errors.New("varint overflows its type")
	errStringTooLong  = errors.New("string longer than 32767 bytes")
	errArrayTooLong   = errors.New("array longer than the bytes that remain")
	errTrailingBytes  = errors.New("trailing bytes after the message")
	errVersion        = errors.New("unsupported version")
)

// reader consumes a request body front to back with the primitive types of
// Kafka's protocol (org.apache.kafka.common.protocol.types.Type and the
// compact variants of KIP-482).
//
// The first failure is sticky: it is kept in err, its position in errOff, and
// off jumps to the end so that every later read fails too and returns zero
// values. A decoder can therefore run straight through a structure and check
// err at loop heads and at the end; array loops stop early because an array
// length read after a failure is 0.
type reader struct {
	b      []byte
	off    int
	err    error
	errOff int
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err, r.errOff = err, r.off
	}
	r.off = len(r.b)
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) int16() int16 {
	if r.remaining() < 2 {
		r.fail(errTruncated)
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b[r.off:]))
	r.off += 2
	return v
}

func (r *reader) int32() int32 {
	if r.remaining() < 4 {
		r.fail(errTruncated)
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b[r.off:]))
	r.off += 4
	return v
}

// uvarint reads an UNSIGNED_VARINT of at most 32 bits. Kafka's
// ByteUtils.readUnsignedVarint stops after 5 bytes; we also reject a fifth
// byte with bits above 2^32, which Java would silently drop.
func (r *reader) uvarint() uint32 {
	var x uint32
	for i := 0; i < 5; i++ {
		if r.off >= len(r.b) {
			r.fail(errTruncated)
			return 0
		}
		c := r.b[r.off]
		r.off++
		if i == 4 && c > 0x0f {
			break
		}
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x
		}
	}
	r.fail(errVarintOverflow)
	return 0
}

// span returns the next n bytes, capped so that an append to the result
// reallocates instead of overwriting the bytes after it.
func (r *reader) span(n int) []byte {
	if n < 0 || n > r.remaining() {
		r.fail(errTruncated)
		return nil
	}
	end := r.off + n
	s := r.b[r.off:end:end]
	r.off = end
	return s
}

// nullableLen reads the length of a nullable string or byte array: length+1 as an unsigned
// varint when flex (0 is null), else a signed int16 (strings) or int32 (bytes) where -1 is
// null. null is also set when the read failed.
func (r *reader) nullableLen(flex, int16Len bool) (n int, null bool) {
	if flex {
		u := r.uvarint()
		if u == 0 {
			return 0, true // null, or a failed read
		}
		return int(u - 1), false
	}
	var l int32
	if int16Len {
		l = int32(r.int16())
	} else {
		l = r.int32()
	}
	switch {
	case r.err != nil, l == -1:
		return 0, true
	case l < -1:
		r.fail(errNegativeLength)
		return 0, true
	}
	return int(l), false
}

// nullableString reads a NULLABLE_STRING, or a COMPACT_NULLABLE_STRING when
// flex. It returns nil for null and a non-nil (possibly empty) slice
// otherwise. Like Java's generated readers it rejects lengths over
// Short.MAX_VALUE even in the compact encoding.
func (r *reader) nullableString(flex bool) []byte {
	n, null := r.nullableLen(flex, true)
	if null {
		return nil
	}
	if n > math.MaxInt16 {
		r.fail(errStringTooLong)
		return nil
	}
	return r.span(n)
}

// string reads a non-nullable STRING or COMPACT_STRING.
func (r *reader) string(flex bool) []byte {
	s := r.nullableString(flex)
	if s == nil {
		r.fail(errNull)
	}
	return s
}

// nullableBytes reads NULLABLE_BYTES, or COMPACT_NULLABLE_BYTES when flex;
// nil for null.
func (r *reader) nullableBytes(flex bool) []byte {
	n, null := r.nullableLen(flex, false)
	if null {
		return nil
	}
	return r.span(n)
}

// arrayLen reads the length of a non-nullable ARRAY or COMPACT_ARRAY whose
// elements take at least minElem bytes each. The length is checked against
// the bytes that remain before anyone sizes a slice with it, so a four byte
// length cannot make the decoder allocate gigabytes.
func (r *reader) arrayLen(flex bool, minElem int) int {
	var n int64
	if flex {
		u := r.uvarint()
		if r.err != nil {
			return 0
		}
		if u == 0 {
			r.fail(errNull)
			return 0
		}
		n = int64(u) - 1
	} else {
		l := r.int32()
		if r.err != nil {
			return 0
		}
		if l < 0 {
			r.fail(errNull)
			return 0
		}
		n = int64(l)
	}
	if n*int64(minElem) > int64(r.remaining()) {
		r.fail(errArrayTooLong)
		return 0
	}
	return int(n)
}

// skipTags skips a KIP-482 tagged field section: a count, then per field a
// tag, a size and size bytes. The produce path knows no tags in requests, so
// all are skipped. Each field takes at least two bytes or fails, so a huge
// count cannot spin.
func (r *reader) skipTags() {
	n := r.uvarint()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.uvarint() // tag
		size := r.uvarint()
		if int64(size) > int64(r.remaining()) {
			r.fail(errTruncated)
			return
		}
		r.off += int(size)
	}
}
