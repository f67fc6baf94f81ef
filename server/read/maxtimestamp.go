package read

import (
	"errors"

	"inlet/batchlog"
	"inlet/wire"
)

// ListOffsets v7's MAX_TIMESTAMP (KIP-734), on its connection's worker: the offset and
// timestamp of the record with the largest timestamp (the earliest such record on a tie).

// OffsetOfMaxTimestamp scans the partition's batches below limit: those of the remote tier
// below the local log start (by the max timestamps their objects' footers keep), then the
// local ones. Batch headers carry their max timestamp, so only the winning batch is decoded;
// a LogAppendTime batch stamps every record with its max timestamp, so its first record is
// the answer.
func (rd *Reader) OffsetOfMaxTimestamp(p *batchlog.Partition, limit int64) (offset, timestamp int64, err error) {
	var (
		best            []byte
		bestTS, bestOff int64 = -1, -1
	)
	if rd.Remote != nil && p.LogStartOffset() < p.LocalLogStartOffset() {
		batch, err := rd.Remote.MaxTimestampBatch(p)
		if err != nil {
			return -1, -1, err
		}
		if h, err := wire.ParseBatchHeader(batch); batch != nil && err == nil && h.BaseOffset < limit {
			bestTS, bestOff = h.MaxTimestamp, h.BaseOffset
			best = append(best[:0], batch...)
		}
	}
	err = rd.scanBatches(p, limit, func(batch []byte, h wire.BatchHeader) (bool, error) {
		if h.MaxTimestamp > bestTS && !h.IsControl() {
			bestTS, bestOff = h.MaxTimestamp, h.BaseOffset
			best = append(best[:0], batch...)
		}
		return false, nil
	})
	if err != nil {
		return -1, -1, err
	}
	if best == nil {
		return -1, -1, nil
	}
	h, _ := wire.ParseBatchHeader(best)
	if h.TimestampType() == 1 {
		return bestOff, bestTS, nil
	}
	found := int64(-1)
	_, err = wire.ForEachRecord(best, nil, func(rec wire.Record) error {
		if h.FirstTimestamp+rec.TimestampDelta == bestTS {
			found = h.BaseOffset + int64(rec.OffsetDelta)
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return -1, -1, err
	}
	if found < 0 {
		found = bestOff
	}
	return found, bestTS, nil
}
