package read

import (
	"errors"

	"inlet/batchlog"
	"inlet/wire"
)

// ListOffsets' search by timestamp (KIP-79), on its connection's worker: the remote tier's
// index of max timestamps first, for a tiered partition with batches below its local log
// start, then a scan of the local batches (scanBatches), which decodes only the batch that
// holds the answer.

var errStopScan = errors.New("found")

// scanBatches calls fn with each stored batch of p from the local log start below limit, and its
// header, until fn says stop or fails. The batch is valid only during the call: the scan reads
// 4 MiB at a time into one buffer. Retention moving the log start past the scan makes it go on
// from the new log start.
func (rd *Reader) scanBatches(p *batchlog.Partition, limit int64, fn func(batch []byte, h wire.BatchHeader) (stop bool, err error)) error {
	const chunk = 4 << 20
	var buf []byte
	var err error
	for from := p.LocalLogStartOffset(); from < limit; {
		buf, err = rd.Log.ReadBatches(p, from, limit, chunk, true, buf[:0])
		if errors.Is(err, batchlog.ErrOffsetOutOfRange) {
			// The local log start only grows, so the scan ends.
			from = max(from, p.LocalLogStartOffset())
			continue
		}
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return nil
		}
		for b := buf; ; {
			batch, rest, err := wire.NextBatch(b)
			if err != nil {
				return err
			}
			if batch == nil {
				break
			}
			b = rest
			h, err := wire.ParseBatchHeader(batch)
			if err != nil {
				return err
			}
			from = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			if stop, err := fn(batch, h); stop || err != nil {
				return err
			}
		}
	}
	return nil
}

// OffsetForTimestamp scans the partition's batches from the log start, below limit, for the
// first record whose timestamp is >= target. Batches whose max timestamp is below the target
// are skipped without decoding. It answers (-1, -1) when no record qualifies, as Kafka does.
func (rd *Reader) OffsetForTimestamp(p *batchlog.Partition, target, limit int64) (offset, timestamp int64, err error) {
	var scratch []byte
	foundOff, foundTS := int64(-1), int64(-1)
	if rd.Remote != nil && p.LogStartOffset() < p.LocalLogStartOffset() {
		batch, err := rd.Remote.FindTimestamp(p, target)
		if err != nil {
			return -1, -1, err
		}
		if batch != nil {
			h, err := wire.ParseBatchHeader(batch)
			if err != nil {
				return -1, -1, err
			}
			if h.BaseOffset < limit {
				found, err := recordAtOrAfter(batch, h, target, &scratch, &foundOff, &foundTS)
				if found || err != nil {
					return foundOff, foundTS, err
				}
			}
		}
	}
	err = rd.scanBatches(p, limit, func(batch []byte, h wire.BatchHeader) (bool, error) {
		if h.MaxTimestamp < target {
			return false, nil
		}
		return recordAtOrAfter(batch, h, target, &scratch, &foundOff, &foundTS)
	})
	if err != nil {
		return -1, -1, err
	}
	return foundOff, foundTS, nil
}

// recordAtOrAfter finds in batch (of header h, max timestamp >= target) the first record whose
// timestamp is >= target, and sets *off and *ts to its offset and timestamp.
func recordAtOrAfter(batch []byte, h wire.BatchHeader, target int64, scratch *[]byte, off, ts *int64) (bool, error) {
	if h.TimestampType() == 1 {
		// LogAppendTime: every record carries the batch's max timestamp.
		*off, *ts = h.BaseOffset, h.MaxTimestamp
		return true, nil
	}
	var err error
	*scratch, err = wire.ForEachRecord(batch, *scratch, func(rec wire.Record) error {
		if t := h.FirstTimestamp + rec.TimestampDelta; t >= target {
			*off, *ts = h.BaseOffset+int64(rec.OffsetDelta), t
			return errStopScan
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		return true, nil
	}
	return false, err
}
