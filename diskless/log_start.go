package diskless

import (
	"encoding/binary"
	"fmt"
)

// A DeleteRecords on a diskless partition moves its log start; the answer names the new low
// watermark, so the move goes into the bucket before the log makes it and answers
// (KeepLogStart, called by the admin API): a state entry in the next commit object, waited for
// as a group's offset commit is (putState). Folded like the partition's batches (fold), it
// raises the partition's log start in the fold, which a checkpoint keeps and a restore gives
// the restored partition after its batches are replayed (restoreProducers). Retention moves the
// log start too, unrecorded: a restore brings the tier's retention back with the topic's
// configs, and it moves the start again.
//
//	StateLogStart  payload: topic id [16], partition i32, log start i64

// KeepLogStart puts partition of the topic with id topicID's new log start in the bucket
// (admin.Diskless): called before the log's start is moved and DeleteRecords is answered.
func (c *Committer) KeepLogStart(topicID [16]byte, partition int32, start int64) error {
	b := make([]byte, 0, 28)
	b = append(b, topicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	return c.putState(StateLogStart, b)
}

func decodeLogStart(b []byte) (partRef, int64, error) {
	if len(b) != 28 {
		return partRef{}, 0, fmt.Errorf("%w: a log start of %d bytes", errBadState, len(b))
	}
	var r partRef
	copy(r.topic[:], b)
	r.index = int32(binary.BigEndian.Uint32(b[16:]))
	start := int64(binary.BigEndian.Uint64(b[20:]))
	if r.index < 0 || start < 0 {
		return partRef{}, 0, fmt.Errorf("%w: log start %d of partition %d", errBadState, start, r.index)
	}
	return r, start, nil
}
