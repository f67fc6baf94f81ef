package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchRecords supplies the record batches of a fetch response while it is encoded, so that
// they are written once, straight into the response frame, instead of being read into a
// buffer of their own and copied into the frame by kmsg's encoder.
type FetchRecords interface {
	// Size is the length of partition p of topic t's record batches, or -1 when they are the
	// partition's RecordBatches field.
	Size(t, p int) int
	// Append appends exactly Size(t, p) bytes to dst. On an error it returns dst as it came,
	// and the partition is answered with UNKNOWN_SERVER_ERROR and no records.
	Append(dst []byte, t, p int) ([]byte, error)
}

// AppendFetchResponse appends resp encoded at its version, 4 to 12, exactly as kmsg's
// AppendTo does, except that the record batches of each partition come from records where it
// has them. Tagged fields are not written (Inlet sets none of Fetch's). errs is told of each
// partition whose records failed.
func AppendFetchResponse(dst []byte, resp *kmsg.FetchResponse, records FetchRecords, errs func(t, p int, err error)) []byte {
	v := resp.Version
	if v < 4 || v > 12 {
		panic(fmt.Sprintf("BUG: wire: fetch response version %d", v))
	}
	flexible := v >= 12
	be := binary.BigEndian
	arrayLen := func(dst []byte, n int) []byte {
		if flexible {
			return binary.AppendUvarint(dst, uint64(n)+1)
		}
		return be.AppendUint32(dst, uint32(n))
	}
	nullLen := func(dst []byte) []byte {
		if flexible {
			return append(dst, 0)
		}
		return be.AppendUint32(dst, ^uint32(0))
	}
	noTags := func(dst []byte) []byte {
		if flexible {
			return append(dst, 0)
		}
		return dst
	}
	dst = be.AppendUint32(dst, uint32(resp.ThrottleMillis))
	if v >= 7 {
		dst = be.AppendUint16(dst, uint16(resp.ErrorCode))
		dst = be.AppendUint32(dst, uint32(resp.SessionID))
	}
	dst = arrayLen(dst, len(resp.Topics))
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		if flexible {
			dst = binary.AppendUvarint(dst, uint64(len(t.Topic))+1)
		} else {
			dst = be.AppendUint16(dst, uint16(len(t.Topic)))
		}
		dst = append(dst, t.Topic...)
		dst = arrayLen(dst, len(t.Partitions))
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			dst = be.AppendUint32(dst, uint32(p.Partition))
			errAt := len(dst)
			dst = be.AppendUint16(dst, uint16(p.ErrorCode))
			dst = be.AppendUint64(dst, uint64(p.HighWatermark))
			dst = be.AppendUint64(dst, uint64(p.LastStableOffset))
			if v >= 5 {
				dst = be.AppendUint64(dst, uint64(p.LogStartOffset))
			}
			if p.AbortedTransactions == nil {
				dst = nullLen(dst)
			} else {
				dst = arrayLen(dst, len(p.AbortedTransactions))
				for _, a := range p.AbortedTransactions {
					dst = be.AppendUint64(dst, uint64(a.ProducerID))
					dst = be.AppendUint64(dst, uint64(a.FirstOffset))
					dst = noTags(dst)
				}
			}
			if v >= 11 {
				dst = be.AppendUint32(dst, uint32(p.PreferredReadReplica))
			}
			n := -1
			if records != nil {
				n = records.Size(ti, pi)
			}
			switch {
			case n >= 0:
				recAt := len(dst)
				dst = bytesLen(dst, n, flexible)
				var err error
				if dst, err = records.Append(dst, ti, pi); err != nil {
					dst = bytesLen(dst[:recAt], 0, flexible)
					code := ErrUnknownServerError
					be.PutUint16(dst[errAt:], uint16(code))
					if errs != nil {
						errs(ti, pi, err)
					}
				}
			case p.RecordBatches == nil:
				dst = nullLen(dst)
			default:
				dst = bytesLen(dst, len(p.RecordBatches), flexible)
				dst = append(dst, p.RecordBatches...)
			}
			dst = noTags(dst)
		}
		dst = noTags(dst)
	}
	return noTags(dst)
}

func bytesLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}
