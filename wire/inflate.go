package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Decompression within memory. A compressed batch is checked as it inflates (ValidateRecords,
// KeylessRecords): the decompressor's output goes through a window of streamWindow bytes that
// the record walk (recordStream) reads from, skipping keys and values, so checking a batch
// never holds its decompressed records, however large they are. Inflating stops at the bound
// (decompressLimit): the byte past it refuses the batch, MESSAGE_TOO_LARGE, so a bomb costs
// the CPU of inflating at most MaxDecompressedBytes (64 MiB) and never the memory.
//
// What a decompressor itself holds while it runs is reserved first from one node-wide budget
// (inflateBudget, InflateBudgetBytes), waiting while it is spent, so that any number of
// connections sending any mix of bombs hold at most that much:
//   - gzip: a 32 KiB window and its tables, pooled: nothing reserved.
//   - lz4: two buffers of the frame's block size (64 KiB to 4 MiB, its descriptor says which).
//   - zstd: the history, at most the frame's window (or, for a single-segment frame, its
//     content size) and never past the bound; decoders of two classes are pooled, one that
//     refuses windows over zstdSmallWindow and one for the rest (up to the bound), the class
//     chosen by the first frame's header (a later frame with a larger window retries the batch
//     with the large class).
//   - snappy: no stream decoder exists for a raw snappy block, so a snappy batch is decoded
//     whole, its decoded length read from its block headers and reserved exactly first; a
//     snappy block cannot decode to more than snappyMaxRatio times its size (a copy of at most
//     64 bytes takes 3), and one that says it does is corrupt, so a snappy bomb is small.
//   - ForEachRecord, which hands out keys and values and so needs them whole (schemas,
//     reads), reserves what the batch may decompress to (exactly for snappy, the bound for
//     the others) before decompressing.
//
// Kafka (LogValidator.validateMessagesAndAssignOffsetsCompressed) also walks a compressed
// batch record by record through a decompressing stream with a pooled buffer
// (RecordBatch.skipKeyValueIterator, skipping keys and values when it need not rewrite the
// batch), but bounds neither the decompressed size nor the ratio: max.message.bytes applies
// to the batch as sent (and as rewritten), so a 1 MiB gzip batch of 1 GiB of zeros is
// inflated whole, at the CPU cost of a gigabyte, before it is accepted.

const (
	// InflateBudgetBytes is what decompressors and whole decompressed batches may hold at
	// once, node-wide: one batch at the bound fits.
	InflateBudgetBytes = MaxDecompressedBytes
	// streamWindow is the record walk's buffer: what a decompressor's output is read into.
	streamWindow = 64 << 10
	// zstdSmallWindow is the largest window of the small zstd decoders: what every common
	// producer writes (librdkafka and Java at the default level: 2 MiB or less; franz-go: at
	// most 8 MiB).
	zstdSmallWindow = 8 << 20
	// zstdOverhead is what a zstd decoder holds beside its history (block buffers).
	zstdOverhead = 512 << 10
	// snappyMaxRatio bounds what a snappy block can decode to: a copy of up to 64 bytes takes
	// at least 3 (a copy with a 2-byte offset; one with a 1-byte offset copies at most 11 in 2).
	snappyMaxRatio = 22
)

// memBudget is a byte semaphore: acquire waits until n bytes are free. Each holder acquires
// once and releases once, never waiting while it holds anything, so it cannot deadlock.
// Waiters are served in arrival order (a ticket each): a holder asking for the whole budget
// (a large batch decompressed whole) is not starved by a stream of small ones, which queue
// behind it instead.
type memBudget struct {
	mu      sync.Mutex
	cond    sync.Cond
	free    int64
	cap     int64
	next    uint64 // the ticket the next acquire takes
	serving uint64 // the ticket whose turn it is
}

func newMemBudget(n int64) *memBudget {
	b := &memBudget{free: n, cap: n}
	b.cond.L = &b.mu
	return b
}

// acquire takes n bytes (at most the whole budget) and returns what it took.
func (b *memBudget) acquire(n int64) int64 {
	n = min(max(n, 0), b.cap)
	if n == 0 {
		return 0
	}
	b.mu.Lock()
	t := b.next
	b.next++
	for b.serving != t || b.free < n {
		b.cond.Wait()
	}
	b.free -= n
	b.serving++
	b.mu.Unlock()
	b.cond.Broadcast() // the next ticket's turn
	return n
}

func (b *memBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

var inflateBudget = newMemBudget(InflateBudgetBytes)

// InflateBudgetHeld is the decompression budget's bytes held now (metrics, tests).
func InflateBudgetHeld() int64 {
	inflateBudget.mu.Lock()
	defer inflateBudget.mu.Unlock()
	return inflateBudget.cap - inflateBudget.free
}

// zstdPools hold streaming zstd decoders (one goroutine each) by class.
var zstdPools = [2]sync.Pool{
	{New: func() any { return newStreamZstd(zstdSmallWindow) }},
	{New: func() any { return newStreamZstd(MaxDecompressedBytes) }},
}

func newStreamZstd(window uint64) *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(window),
		zstd.WithDecoderMaxMemory(MaxDecompressedBytes),
	)
	if err != nil {
		panic(fmt.Sprintf("BUG: wire: zstd decoder: %v", err))
	}
	return d
}

// zstdFrame reads the window a zstd frame at the front of src needs (RFC 8878 3.1.1.1): its
// window descriptor, or for a single-segment frame its content size; and the content size
// the frame declares (-1: none). ok is false when src does not start with a whole zstd frame
// header (the decoder then says why).
func zstdFrame(src []byte) (window uint64, content int64, ok bool) {
	if len(src) < 6 || binary.LittleEndian.Uint32(src) != 0xFD2FB528 {
		return 0, -1, false
	}
	fhd := src[4]
	single := fhd&(1<<5) != 0
	p := 5
	if !single {
		wd := src[p]
		exp, mant := uint64(wd>>3), uint64(wd&7)
		base := uint64(1) << (10 + exp)
		window = base + base/8*mant
		p++
	}
	p += []int{0, 1, 2, 4}[fhd&3] // dictionary id
	var fcs uint64
	switch fhd >> 6 {
	case 0:
		if !single {
			return window, -1, true
		}
		if len(src) < p+1 {
			return 0, -1, false
		}
		fcs = uint64(src[p])
	case 1:
		if len(src) < p+2 {
			return 0, -1, false
		}
		fcs = uint64(binary.LittleEndian.Uint16(src[p:])) + 256
	case 2:
		if len(src) < p+4 {
			return 0, -1, false
		}
		fcs = uint64(binary.LittleEndian.Uint32(src[p:]))
	case 3:
		if len(src) < p+8 {
			return 0, -1, false
		}
		fcs = binary.LittleEndian.Uint64(src[p:])
	}
	if single {
		window = max(fcs, 1<<10)
	}
	return window, int64(min(fcs, 1<<62)), true
}

// lz4BlockMax is the block size an lz4 frame's descriptor declares (0 when src is not one).
func lz4BlockMax(src []byte) int64 {
	if len(src) < 6 || binary.LittleEndian.Uint32(src) != 0x184D2204 {
		return 0
	}
	switch (src[5] >> 4) & 7 {
	case 4:
		return 64 << 10
	case 5:
		return 256 << 10
	case 6:
		return 1 << 20
	}
	return 4 << 20
}

// inflater is a streaming decompressor of one batch's records, and what it reserved. Its
// parts are pooled; close gives them back (no closures: the produce path allocates nothing).
type inflater struct {
	r        io.Reader
	reserved int64
	g        *gzipDecoder
	l        *lz4Decoder
	z        *zstd.Decoder
	zsrc     *bytes.Reader
	zpool    *sync.Pool
}

// openStream starts decompressing src (gzip, lz4 or zstd) for a streaming walk. zstdClass is
// the zstd decoder class to use (0 small, 1 large: again after a later frame needed more).
func openStream(codec uint8, src []byte, limit int, zstdClass int) (inflater, error) {
	switch codec {
	case CompressionGzip:
		g := gzipPool.Get().(*gzipDecoder)
		g.src.Reset(src)
		if err := g.r.Reset(&g.src); err != nil {
			g.release()
			return inflater{}, fmt.Errorf("%w: gzip: %w", errDecompress, err)
		}
		return inflater{r: &g.r, g: g}, nil
	case CompressionLZ4:
		n := inflateBudget.acquire(2 * max(lz4BlockMax(src), 64<<10))
		l := lz4Pool.Get().(*lz4Decoder)
		l.src.Reset(src)
		l.r.Reset(&l.src)
		return inflater{r: l.r, reserved: n, l: l}, nil
	case CompressionZstd:
		w, content, ok := zstdFrame(src)
		if ok && content > int64(limit) {
			// Refused before inflating anything, as DecodeAll refuses a frame that declares
			// more than its bound.
			return inflater{}, fmt.Errorf("%w: zstd: a frame of %d bytes over %d", errDecompressBound, content, limit)
		}
		if ok && w > zstdSmallWindow {
			zstdClass = 1
		}
		classMax := uint64(zstdSmallWindow)
		if zstdClass == 1 {
			classMax = MaxDecompressedBytes
		}
		n := inflateBudget.acquire(int64(min(w, uint64(limit), classMax)) + zstdOverhead)
		f := inflater{reserved: n, zpool: &zstdPools[zstdClass]}
		f.z = f.zpool.Get().(*zstd.Decoder)
		f.zsrc = zstdSrcPool.Get().(*bytes.Reader)
		f.zsrc.Reset(src)
		if err := f.z.Reset(f.zsrc); err != nil {
			f.close()
			return inflater{}, fmt.Errorf("%w: zstd: %w", errDecompress, err)
		}
		f.r = f.z
		return f, nil
	}
	return inflater{}, fmt.Errorf("%w %d", errCodec, codec)
}

var zstdSrcPool = sync.Pool{New: func() any { return new(bytes.Reader) }}

func (f inflater) close() {
	switch {
	case f.g != nil:
		f.g.release()
	case f.l != nil:
		f.l.release()
	case f.z != nil:
		_ = f.z.Reset(nil)
		f.zsrc.Reset(nil)
		zstdSrcPool.Put(f.zsrc)
		f.zpool.Put(f.z)
	}
	inflateBudget.release(f.reserved)
}

// recordStream reads records from a decompressing stream through buf: buf[off:end] is what
// has been read and not yet taken; total counts every byte read from r, which may not pass
// limit.
type recordStream struct {
	r        io.Reader
	buf      []byte
	off, end int
	total    int
	limit    int
	err      error // the stream's error, once it failed (io.EOF at its end)
	codec    string
}

// fill makes at least n bytes available (n <= len(buf)); false when the stream ended or failed
// first (s.err says which).
func (s *recordStream) fill(n int) bool {
	for s.end-s.off < n {
		if s.err != nil {
			return false
		}
		if s.off > 0 {
			s.end = copy(s.buf, s.buf[s.off:s.end])
			s.off = 0
		}
		k, err := s.r.Read(s.buf[s.end:])
		s.end += k
		s.total += k
		if s.total > s.limit {
			s.err = fmt.Errorf("%w: %s: over %d bytes", errDecompressBound, s.codec, s.limit)
			return false
		}
		if err != nil {
			if err != io.EOF {
				err = fmt.Errorf("%w: %s: %w", errDecompress, s.codec, err)
			}
			s.err = err
		}
	}
	return true
}

// skip drops n bytes of the stream.
func (s *recordStream) skip(n int) bool {
	for n > 0 {
		if s.off == s.end && !s.fill(1) {
			return false
		}
		k := min(n, s.end-s.off)
		s.off += k
		n -= k
	}
	return true
}

// varint reads a zigzag varint of at most max bytes (5: int, 10: long) and returns it with
// its length; k 0 when the stream ended first, -1 when it is malformed.
func (s *recordStream) varint(maxLen int) (int64, int) {
	s.fill(maxLen) // as much as there is
	b := s.buf[s.off:s.end]
	if maxLen == 5 {
		v, k := varint(b)
		if k > 0 {
			s.off += k
		}
		return int64(v), k
	}
	v, k := binary.Varint(b[:min(len(b), 10)])
	if k > 0 {
		s.off += k
		return v, k
	}
	if k == 0 {
		return 0, 0
	}
	return 0, -1
}

// failure is the error to report for a record that could not be read: the stream's own
// (a bound passed, or corrupt data) when it failed, else def.
func (s *recordStream) failure(def error) error {
	if s.err != nil && s.err != io.EOF {
		return s.err
	}
	return def
}

// walk checks n records as walkRecords does, reading them from the stream, and calls keyless
// (when set) with the index of each record whose key is null. It reads the stream to its end:
// nothing may follow the last record, and the decompressor checks its trailer there.
func (s *recordStream) walk(n int32, keyless func(int32)) (i int32, delta int32, err error) {
	for ; i < n; i++ {
		if !s.fill(1) {
			return i, 0, s.failure(errPrematureEOF)
		}
		size, k := s.varint(5)
		if k <= 0 {
			return i, 0, s.failure(errRecordsVarint)
		}
		if size < 0 {
			return i, 0, fmt.Errorf("%w: %d bytes declared", errRecordsTruncated, size)
		}
		rem := int(size)
		// field reads a varint inside the record.
		field := func(maxLen int) (int64, bool) {
			v, k := s.varint(maxLen)
			if k <= 0 || k > rem {
				return 0, false
			}
			rem -= k
			return v, true
		}
		if rem < 1 || !s.fill(1) {
			return i, 0, s.failure(errRecordSize)
		}
		s.off++ // attributes
		rem--
		if _, ok := field(10); !ok { // timestamp delta
			return i, 0, s.failure(errRecordsVarint)
		}
		d, ok := field(5)
		if !ok {
			return i, 0, s.failure(errRecordsVarint)
		}
		if int32(d) != i {
			return i, int32(d), errOffsetDelta
		}
		for f := range 2 { // key, value
			l, ok := field(5)
			if !ok {
				return i, 0, s.failure(errRecordsVarint)
			}
			if l < 0 && f == 0 && keyless != nil {
				keyless(i)
			}
			if l > 0 {
				if int(l) > rem {
					return i, 0, errRecordSize
				}
				if !s.skip(int(l)) {
					return i, 0, s.failure(errRecordsTruncated)
				}
				rem -= int(l)
			}
		}
		nh, ok := field(5)
		if !ok {
			return i, 0, s.failure(errRecordsVarint)
		}
		if nh < 0 || int(nh) > rem {
			return i, 0, errRecordHeaders
		}
		for range nh {
			kl, ok := field(5)
			if !ok {
				return i, 0, s.failure(errRecordsVarint)
			}
			if kl < 0 {
				return i, 0, errRecordHeaderKey
			}
			if int(kl) > rem {
				return i, 0, errRecordSize
			}
			if !s.skip(int(kl)) {
				return i, 0, s.failure(errRecordsTruncated)
			}
			rem -= int(kl)
			vl, ok := field(5)
			if !ok {
				return i, 0, s.failure(errRecordsVarint)
			}
			if vl > 0 {
				if int(vl) > rem {
					return i, 0, errRecordSize
				}
				if !s.skip(int(vl)) {
					return i, 0, s.failure(errRecordsTruncated)
				}
				rem -= int(vl)
			}
		}
		if rem != 0 {
			return i, 0, errRecordSize
		}
	}
	if s.fill(1) {
		return n, 0, errRecordsTrailing
	}
	return n, 0, s.failure(nil)
}

// streamRecords walks the records of a compressed batch (gzip, lz4 or zstd) as they inflate,
// through window (grown to streamWindow once), and returns window, the records walked and
// why it stopped (nil: all n, and nothing after).
func streamRecords(codec uint8, data []byte, n int32, window []byte, keyless func(int32)) ([]byte, int32, int32, error) {
	if cap(window) < streamWindow {
		window = make([]byte, streamWindow)
	}
	window = window[:cap(window)]
	limit := decompressLimit(data)
	for class := 0; ; class++ {
		f, err := openStream(codec, data, limit, class)
		if err != nil {
			return window, 0, 0, err
		}
		s := recordStream{r: f.r, buf: window, limit: limit, codec: codecLabel(codec)}
		i, delta, err := walkStream(f, &s, n, keyless)
		// A later frame whose window is over the small class fails in the decoder's frame
		// reset (ErrWindowSizeExceeded) or, single-segment, at its declared size
		// (ErrDecoderSizeExceeded): again with the large class, the records from the start.
		if codec == CompressionZstd && class == 0 && s.total <= limit &&
			(errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded)) {
			if keyless != nil {
				keyless(-1) // start over: the keyless records found so far are reported again
			}
			continue
		}
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			err = fmt.Errorf("%w: %w", errDecompressBound, err)
		}
		return window, i, delta, err
	}
}

// walkStream walks s and closes f (giving its share of the budget back) however the walk
// ends, a panic included.
func walkStream(f inflater, s *recordStream, n int32, keyless func(int32)) (int32, int32, error) {
	defer f.close()
	return s.walk(n, keyless)
}

func codecLabel(c uint8) string {
	switch c {
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprint(c)
}
