package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompression bounds. A compressed batch is at most max.message.bytes on
// the wire, but gzip and zstd reach ratios over 1000:1 on repetitive data,
// so without a bound one request could make the broker allocate gigabytes
// (a zip bomb). A batch is rejected when its records would decompress to
// more than MaxDecompressedBytes, or to more than MaxCompressionRatio times
// the compressed payload once past decompressFloor. The floor exists because
// a tiny batch of a repeated byte legitimately beats 1000:1 (a zstd frame of
// 20 bytes can describe a megabyte of zeros), and a megabyte is harmless.
const (
	MaxDecompressedBytes = 64 << 20
	MaxCompressionRatio  = 1000
	decompressFloor      = 1 << 20
)

// Record is one decoded record of a batch (DefaultRecord.java). Key and Value
// alias the batch, or the decompressed data in scratch for a compressed
// batch. Key == nil means a null key, Value == nil a null value (a
// tombstone). Headers counts the record's headers, whose bytes are checked
// but not returned.
type Record struct {
	OffsetDelta    int32
	TimestampDelta int64
	Key, Value     []byte
	Headers        int
	// Raw is the whole encoded record, its length prefix included: what a rewritten batch
	// (compaction) copies unchanged.
	Raw []byte
}

// Errors from ForEachRecord. RecordsErrorCode maps them to Kafka codes.
var (
	errRecordsTruncated = errors.New("wire: record batch: records run past the end of the batch")
	errRecordsTrailing  = errors.New("wire: record batch: incorrect declared batch size, records still remaining")
	errRecordsVarint    = errors.New("wire: record batch: malformed varint")
	errRecordSize       = errors.New("wire: record batch: record size does not match its fields")
	errRecordHeaders    = errors.New("wire: record batch: invalid number of record headers")
	errRecordHeaderKey  = errors.New("wire: record batch: invalid negative header key size")
	errRecordsCount     = errors.New("wire: record batch: invalid record count")
	errBatchLength      = errors.New("wire: record batch: length field disagrees with the buffer")
	errCodec            = errors.New("wire: record batch: unknown compression codec")
	errDecompress       = errors.New("wire: record batch: cannot decompress")
	errDecompressBound  = errors.New("wire: record batch: decompressed size over the bound")
)

// RecordsErrorCode maps an error returned by ForEachRecord to the Kafka
// error code for the partition: MESSAGE_TOO_LARGE when decompression hit
// its bound (a Java producer splits the batch and retries), CORRUPT_MESSAGE
// when the payload does not decompress, INVALID_RECORD for a malformed
// record (DefaultRecord.readFrom throws InvalidRecordException), and ErrNone
// for anything else, such as an error returned by fn.
func RecordsErrorCode(err error) int16 {
	switch {
	case err == nil:
		return ErrNone
	case errors.Is(err, errDecompressBound):
		return ErrMessageTooLarge
	case errors.Is(err, errDecompress), errors.Is(err, errCodec):
		return ErrCorruptMessage
	case errors.Is(err, errRecordsTruncated), errors.Is(err, errRecordsTrailing),
		errors.Is(err, errRecordsVarint), errors.Is(err, errRecordSize),
		errors.Is(err, errRecordHeaders), errors.Is(err, errRecordHeaderKey),
		errors.Is(err, errRecordsCount), errors.Is(err, errBatchLength),
		errors.Is(err, errShortBatch):
		return ErrInvalidRecord
	}
	return ErrNone
}

// ForEachRecord decompresses batch if needed and calls fn for each record in
// order, stopping at the first error from fn, which it returns unwrapped.
//
// Codecs: gzip; snappy both with the xerial framing that Kafka's Java client
// writes (snappy-java's SnappyOutputStream) and as one plain block, as
// librdkafka and franz-go write it (snappy-java's SnappyInputStream reads
// both the same way); lz4 frames; zstd. scratch is the destination of the
// decompressed records; the possibly grown scratch is returned so callers
// can reuse it, and Key/Value of a compressed batch alias it. An uncompressed
// batch leaves scratch alone and allocates nothing. When decompression
// fails, the scratch passed in comes back untouched, so that a rejected bomb
// does not leave a huge buffer with the caller; a valid batch can still grow
// it up to MaxDecompressedBytes, so a caller that pools scratch buffers
// should drop the ones that grew past its taste.
//
// The records must match the header the way DefaultRecordBatch's iterator
// demands: exactly NumRecords records, each exactly as long as its length
// prefix says, nothing left over. Varints follow ByteUtils (at most 5 bytes
// for an int, 10 for a long). The CRC is not checked here: call
// ValidateProduceBatch first.
func ForEachRecord(batch []byte, scratch []byte, fn func(Record) error) ([]byte, error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return scratch, err
	}
	end := logOverhead + int64(h.BatchLength)
	if end < RecordBatchOverhead || end > int64(len(batch)) {
		return scratch, errBatchLength
	}
	if h.NumRecords < 0 {
		return scratch, errRecordsCount
	}
	data := batch[RecordBatchOverhead:end]
	if c := h.Compression(); c != CompressionNone {
		// On failure the caller keeps its own scratch: a rejected
		// bomb must not leave a 64 MiB buffer behind for reuse. The
		// decompressed records are held (inflate.go's budget) until
		// fn has seen the last of them.
		out, held, err := decompressHeld(c, data, scratch[:0])
		defer inflateBudget.release(held)
		if err != nil {
			return scratch, err
		}
		scratch, data = out, out
	}
	for i := int32(0); i < h.NumRecords; i++ {
		var rec Record
		if data, err = nextRecord(data, &rec); err != nil {
			return scratch, fmt.Errorf("record %d: %w", i, err)
		}
		if err := fn(rec); err != nil {
			return scratch, err
		}
	}
	if len(data) != 0 {
		return scratch, errRecordsTrailing
	}
	return scratch, nil
}

// nextRecord decodes the record at the front of data into rec and returns
// the rest, following DefaultRecord.readFrom:
//
//	length varint, attributes int8, timestampDelta varlong,
//	offsetDelta varint, keyLength varint, key, valueLength varint, value,
//	headerCount varint, then per header: keyLength varint (>= 0), key,
//	valueLength varint, value
//
// A negative key or value length means null, as in Java. The record's fields
// must use exactly length bytes.
func nextRecord(data []byte, rec *Record) ([]byte, error) {
	size, n := varint(data)
	if n <= 0 {
		return nil, errRecordsVarint
	}
	whole := data
	data = data[n:]
	if size < 0 || int64(size) > int64(len(data)) {
		return nil, errRecordsTruncated
	}
	b, rest := data[:size:size], data[size:]
	rec.Raw = whole[: n+int(size) : n+int(size)]

	if len(b) < 1 {
		return nil, errRecordSize
	}
	b = b[1:] // attributes: unused since magic 2
	var ok bool
	if rec.TimestampDelta, b, ok = takeVarlong(b); !ok {
		return nil, errRecordsVarint
	}
	if rec.OffsetDelta, b, ok = takeVarint(b); !ok {
		return nil, errRecordsVarint
	}
	if rec.Key, b, ok = takeBytes(b); !ok {
		return nil, errRecordSize
	}
	if rec.Value, b, ok = takeBytes(b); !ok {
		return nil, errRecordSize
	}
	var nh int32
	if nh, b, ok = takeVarint(b); !ok {
		return nil, errRecordsVarint
	}
	// Each header takes at least two bytes, so a count past the bytes
	// left is wrong (Java: "larger than the remaining size").
	if nh < 0 || int(nh) > len(b) {
		return nil, errRecordHeaders
	}
	for range nh {
		var kl int32
		if kl, b, ok = takeVarint(b); !ok {
			return nil, errRecordsVarint
		}
		if kl < 0 {
			return nil, errRecordHeaderKey
		}
		if int(kl) > len(b) {
			return nil, errRecordSize
		}
		b = b[kl:]
		if _, b, ok = takeBytes(b); !ok {
			return nil, errRecordSize
		}
	}
	if len(b) != 0 {
		return nil, errRecordSize
	}
	rec.Headers = int(nh)
	return rest, nil
}

// varint decodes a zigzag int32 of at most 5 bytes (ByteUtils.readVarint).
// n is the bytes used, 0 when data ends first, -1 on overflow.
func varint(data []byte) (int32, int) {
	var x uint32
	for i := 0; i < 5; i++ {
		if i >= len(data) {
			return 0, 0
		}
		c := data[i]
		if i == 4 && c > 0x0f {
			return 0, -1
		}
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(x>>1) ^ -int32(x&1), i + 1
		}
	}
	return 0, -1 // unreachable: the fifth byte returns or fails above
}

func takeVarint(b []byte) (int32, []byte, bool) {
	v, n := varint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// takeVarlong decodes a zigzag int64 of at most 10 bytes
// (ByteUtils.readVarlong); binary.Varint rejects longer or overflowing ones.
func takeVarlong(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// takeBytes takes a varint length and that many bytes; a negative length is
// null (nil).
func takeBytes(b []byte) ([]byte, []byte, bool) {
	l, b, ok := takeVarint(b)
	if !ok {
		return nil, nil, false
	}
	if l < 0 {
		return nil, b, true
	}
	if int(l) > len(b) {
		return nil, nil, false
	}
	return b[:l:l], b[l:], true
}

// decompressLimit is the most that src may decompress to; see
// MaxDecompressedBytes.
func decompressLimit(src []byte) int {
	return min(MaxDecompressedBytes, max(decompressFloor, MaxCompressionRatio*len(src)))
}

// decompressHeld decompresses src whole into dst (len 0), as decompress does, after
// reserving from the decompression budget what the output may take: a snappy payload's
// decoded length, read from its headers, or the bound for the others. held is what the caller
// releases (inflateBudget.release) once done with the output, also on error.
func decompressHeld(codec uint8, src, dst []byte) (out []byte, held int64, err error) {
	var need int64
	if codec == CompressionSnappy {
		n, err := snappyDecodedLen(src, decompressLimit(src))
		if err != nil {
			return dst, 0, err
		}
		need = int64(n)
	} else {
		need = int64(decompressLimit(src))
	}
	held = inflateBudget.acquire(need)
	out, err = decompress(codec, src, dst)
	return out, held, err
}

// decompress appends the decompressed src to dst (len 0) and returns it.
// On error the returned slice is meaningless.
func decompress(codec uint8, src, dst []byte) ([]byte, error) {
	limit := decompressLimit(src)
	switch codec {
	case CompressionGzip:
		g := gzipPool.Get().(*gzipDecoder)
		defer g.release()
		g.src.Reset(src)
		if err := g.r.Reset(&g.src); err != nil {
			return dst, fmt.Errorf("%w: gzip: %w", errDecompress, err)
		}
		dst, err := readBounded(&g.r, dst, limit, len(src))
		if err != nil {
			return dst, fmt.Errorf("gzip: %w", err)
		}
		return dst, nil
	case CompressionSnappy:
		return decompressSnappy(src, dst, limit)
	case CompressionLZ4:
		l := lz4Pool.Get().(*lz4Decoder)
		defer l.release()
		l.src.Reset(src)
		l.r.Reset(&l.src)
		dst, err := readBounded(l.r, dst, limit, len(src))
		if err != nil {
			return dst, fmt.Errorf("lz4: %w", err)
		}
		return dst, nil
	case CompressionZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return dst, fmt.Errorf("%w: zstd: %w", errDecompress, err)
		}
		// The decoder enforces MaxDecompressedBytes itself, before
		// allocating when the frame declares its size; the ratio bound
		// is checked after, which costs at most MaxDecompressedBytes.
		out, err := dec.DecodeAll(src, dst)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return dst, fmt.Errorf("%w: zstd: %w", errDecompressBound, err)
		}
		if err != nil {
			return dst, fmt.Errorf("%w: zstd: %w", errDecompress, err)
		}
		if len(out) > limit {
			return dst, fmt.Errorf("%w: zstd: %d bytes from %d", errDecompressBound, len(out), len(src))
		}
		return out, nil
	}
	return dst, fmt.Errorf("%w %d", errCodec, codec)
}

// readBounded reads r to EOF into dst, failing once more than limit bytes
// come out. It grows dst geometrically from a guess of a few times the
// compressed size, so memory stays within twice the output and never far
// past limit.
func readBounded(r io.Reader, dst []byte, limit, srcLen int) ([]byte, error) {
	if cap(dst) == 0 {
		dst = make([]byte, 0, min(limit+1, max(4*srcLen, 4<<10)))
	}
	for {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return nil, errDecompressBound
			}
			// Grow by doubling, but never past limit+1: one byte
			// over the limit is enough to know it is exceeded. A
			// doubling that reaches the limit goes straight to
			// limit+1, or output of exactly limit bytes would need
			// one more full-size reallocation to see EOF.
			n := max(2*cap(dst), 4<<10)
			if n >= limit {
				n = limit + 1
			}
			g := make([]byte, len(dst), n)
			copy(g, dst)
			dst = g
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			if len(dst) > limit {
				return nil, errDecompressBound
			}
			return dst, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errDecompress, err)
		}
	}
}

// xerialMagic starts a snappy-java stream (SnappyCodec.MAGIC_HEADER),
// followed by two int32s, version and minimum compatible version, and then
// blocks, each an int32 compressed length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16

// snappyBlockLen is the decoded length a snappy block declares, refused when it is more
// than snappy can encode in the block (snappyMaxRatio: s2, which decodes the blocks, also
// takes its own extensions, whose repeats reach any ratio; no snappy encoder writes them).
func snappyBlockLen(blk []byte, what string, limit int) (int, error) {
	n, err := s2.DecodedLen(blk)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", errDecompress, what, err)
	}
	if n > limit {
		return 0, fmt.Errorf("%w: %s: %d bytes from %d", errDecompressBound, what, n, len(blk))
	}
	if int64(n) > snappyMaxRatio*int64(len(blk))+64 {
		return 0, fmt.Errorf("%w: %s: a block of %d bytes declares %d, more than snappy encodes in it", errDecompress, what, len(blk), n)
	}
	return n, nil
}

// snappyDecodedLen is what src (xerial framed or plain snappy) decodes to, read from its
// block headers, refused past limit.
func snappyDecodedLen(src []byte, limit int) (int, error) {
	if len(src) < xerialHeaderLen || !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlockLen(src, "snappy", limit)
	}
	total := 0
	for rest := src[xerialHeaderLen:]; len(rest) > 0; {
		blk, next, err := xerialBlock(rest)
		if err != nil {
			return 0, err
		}
		n, err := snappyBlockLen(blk, "snappy (xerial)", limit-total)
		if err != nil {
			return 0, err
		}
		if total += n; total > limit {
			return 0, fmt.Errorf("%w: snappy (xerial): over %d bytes from %d", errDecompressBound, limit, len(src))
		}
		rest = next
	}
	return total, nil
}

// decompressSnappy decodes xerial framed or plain snappy. Decoded lengths are
// read from the block headers and bounded before anything is allocated; s2
// decodes snappy blocks (it is a superset of the format).
func decompressSnappy(src, dst []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderLen || !bytes.HasPrefix(src, xerialMagic) {
		n, err := snappyDecodedLen(src, limit)
		if err != nil {
			return dst, err
		}
		dst = growCap(dst, n)
		out, err := s2.Decode(dst[:n], src)
		if err != nil {
			return dst, fmt.Errorf("%w: snappy: %w", errDecompress, err)
		}
		return out, nil
	}
	// Walk the blocks once to bound and size the output, then decode each
	// block straight into place.
	total, err := snappyDecodedLen(src, limit)
	if err != nil {
		return dst, err
	}
	dst = growCap(dst, total)
	for rest := src[xerialHeaderLen:]; len(rest) > 0; {
		blk, next, _ := xerialBlock(rest)
		n, _ := s2.DecodedLen(blk)
		if _, err := s2.Decode(dst[len(dst):len(dst)+n], blk); err != nil {
			return nil, fmt.Errorf("%w: snappy (xerial): %w", errDecompress, err)
		}
		dst = dst[:len(dst)+n]
		rest = next
	}
	return dst, nil
}

func xerialBlock(b []byte) (blk, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("%w: snappy (xerial): truncated block length", errDecompress)
	}
	n := int64(binary.BigEndian.Uint32(b))
	if n > int64(len(b)-4) {
		return nil, nil, fmt.Errorf("%w: snappy (xerial): block of %d bytes past the end", errDecompress, n)
	}
	return b[4 : 4+n], b[4+n:], nil
}

// growCap returns dst (len 0) with capacity for at least n bytes.
func growCap(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst[:0]
	}
	return make([]byte, 0, n)
}

// Decoders are pooled with the bytes.Reader they read from, so that a
// steady stream of compressed batches reuses their window buffers.
type gzipDecoder struct {
	r   gzip.Reader
	src bytes.Reader
}

type lz4Decoder struct {
	r   *lz4.Reader
	src bytes.Reader
}

// release drops the reference to the batch, so that a pooled decoder does
// not keep a request buffer alive, and returns the decoder to its pool.
func (g *gzipDecoder) release() {
	g.src.Reset(nil)
	gzipPool.Put(g)
}

func (l *lz4Decoder) release() {
	l.src.Reset(nil)
	lz4Pool.Put(l)
}

var (
	gzipPool = sync.Pool{New: func() any { return new(gzipDecoder) }}
	lz4Pool  = sync.Pool{New: func() any { return &lz4Decoder{r: lz4.NewReader(nil)} }}
)

// zstdDecoder is one shared decoder: DecodeAll is safe for concurrent use
// and runs up to GOMAXPROCS decodes at once, each with its own block
// decoder. WithDecoderMaxMemory bounds any one DecodeAll's output.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxDecompressedBytes),
	)
})
