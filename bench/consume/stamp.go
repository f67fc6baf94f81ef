package consume

import (
	"encoding/binary"
	"time"
)

// The stamp a tail record carries, written by a tail producer (Producers.Send) and read back by
// a reader (E2EMicros). A tail record's value is
//
//	bytes 0..7    send time, Unix nanoseconds, big endian
//	bytes 8..11   producer index, big endian
//	bytes 12..19  sequence number within that producer, big endian
//	bytes 20..    padding up to the record size
//
// The send time is the record's intended time on the open-loop schedule (loadgen's rule), so a
// producer held up by the broker shows as latency. Sender and receivers are in one process and
// take their Unix nanoseconds as base + the monotonic time since base (StampNanos): a step of
// the wall clock during the tail cannot make a latency.

// StampSize is the stamp's length: the smallest record the tail can send.
const StampSize = 20

// putStamp writes the stamp of (sent, producer, seq) into the head of v.
func putStamp(v []byte, sent int64, producer uint32, seq uint64) {
	binary.BigEndian.PutUint64(v[0:8], uint64(sent))
	binary.BigEndian.PutUint32(v[8:12], producer)
	binary.BigEndian.PutUint64(v[12:20], seq)
}

// StampNanos is t in Unix nanoseconds, measured from base on the monotonic clock.
func StampNanos(base time.Time, t time.Time) int64 { return base.UnixNano() + int64(t.Sub(base)) }

// e2eMicros is the end-to-end latency of a tail record received at recv (Unix nanoseconds):
// false for a value too short to hold a stamp or one sent before notBefore (the phase's start)
// or after it was received, which no tail record can be.
func e2eMicros(v []byte, notBefore, recv int64) (uint64, bool) {
	if len(v) < StampSize {
		return 0, false
	}
	sent := int64(binary.BigEndian.Uint64(v[0:8]))
	if sent < notBefore || sent > recv {
		return 0, false
	}
	return uint64(recv-sent) / 1e3, true
}
