package objstore

import (
	"errors"
	"io"
	"net"
)

// Streamed is a Put body that writes itself: WriteTo writes the body from its read position
// to its end. OpenS3's Put over plain http hands it the connection (vectored.go), so that its
// bytes reach the socket with no copy through net/http's 32 KiB buffer; elsewhere it is read
// as any io.ReadSeeker. Its reads and writes all end before Put returns. StreamedPut marks a
// type as one (a bytes.Reader, say, writes itself too, but is sent as ever). Buffers is one;
// the remote tier's object body another.
type Streamed interface {
	io.ReadSeeker
	io.WriterTo
	StreamedPut()
}

// Checksummed is a Put body that may know its CRC-32C (Castagnoli) before it is sent, as a
// Buffers given one by WithCRC32C. A Bucket sends the sum with the body (OpenS3's as
// x-amz-checksum-crc32c, which S3 and versitygw check), and refuses a body that arrived other
// than it left with ErrBadDigest, storing nothing. The S3 server then stores that checksum
// rather than computing one of its own choosing (CRC-64/NVME by default) over the body.
type Checksummed interface {
	CRC32C() (sum uint32, ok bool)
}

// StreamedPut marks Buffers as Streamed.
func (b *Buffers) StreamedPut() {}

// Buffers is a Put body made of slices sent one after another and read in place: the diskless
// commit objects, whose batches stay in the produce requests' frames until the object has
// landed. Every Bucket reads it as any io.ReadSeeker; OpenS3's over plain http hands the
// slices to the socket in vectored writes (vectored.go, WriteTo), with no copy in user space.
//
// The slices must not change until Put returns; Put reads none of them after it returns (the
// Bucket contract).
type Buffers struct {
	parts  [][]byte
	size   int64
	off    int64 // read position
	i, at  int   // the part holding off, and off's position in it
	sum    uint32
	summed bool // sum is the body's CRC-32C (WithCRC32C)
}

// WithCRC32C gives the body its CRC-32C (Castagnoli), known to its maker before it is sent
// (Checksummed), and returns it.
func (b *Buffers) WithCRC32C(sum uint32) *Buffers {
	b.sum, b.summed = sum, true
	return b
}

// CRC32C is the body's CRC-32C, if WithCRC32C gave it one.
func (b *Buffers) CRC32C() (uint32, bool) { return b.sum, b.summed }

// NewBuffers is a body of parts, in order. It keeps parts (the slice, not a copy).
func NewBuffers(parts [][]byte) *Buffers {
	b := &Buffers{parts: parts}
	for _, p := range parts {
		b.size += int64(len(p))
	}
	return b
}

// Len is the body's size.
func (b *Buffers) Len() int64 { return b.size }

// Bytes is a copy of the whole body in one slice.
func (b *Buffers) Bytes() []byte {
	flat := make([]byte, 0, b.size)
	for _, p := range b.parts {
		flat = append(flat, p...)
	}
	return flat
}

// Parts are the body's slices, in order (not a copy).
func (b *Buffers) Parts() [][]byte { return b.parts }

func (b *Buffers) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && b.i < len(b.parts) {
		c := copy(p[n:], b.parts[b.i][b.at:])
		n += c
		b.at += c
		if b.at == len(b.parts[b.i]) {
			b.i, b.at = b.i+1, 0
		}
	}
	b.off += int64(n)
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo writes the body from its read position with vectored writes where w takes them
// (net.Buffers: writev on a TCP connection).
func (b *Buffers) WriteTo(w io.Writer) (int64, error) {
	if b.i >= len(b.parts) {
		return 0, nil
	}
	bufs := make(net.Buffers, 0, len(b.parts)-b.i)
	bufs = append(bufs, b.parts[b.i][b.at:])
	bufs = append(bufs, b.parts[b.i+1:]...)
	n, err := bufs.WriteTo(w)
	_, _ = b.Seek(b.off+n, io.SeekStart)
	return n, err
}

func (b *Buffers) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.off
	case io.SeekEnd:
		offset += b.size
	default:
		return 0, errors.New("objstore: Buffers.Seek: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("objstore: Buffers.Seek: negative position")
	}
	b.off, b.i, b.at = offset, 0, 0
	for rest := offset; b.i < len(b.parts); b.i++ {
		if rest < int64(len(b.parts[b.i])) {
			b.at = int(rest)
			break
		}
		rest -= int64(len(b.parts[b.i]))
	}
	return offset, nil
}
