package batchlog

import (
	"errors"

	"inlet/batchlog/segments"
	"inlet/wire"
)

// The read path of a fetch is in two steps, so the record data is copied once: PlanRead
// locates the batches (through the store seam: the segment store's index and read caches,
// segments/readplan.go), AppendPlanned copies them into the caller's buffer (ReadPlan.AppendTo).

// ReadPlan is the stored batches one read returns, located but not yet read
// (segments.ReadPlan). The zero value is ready for PlanRead; Release lets go of it
// (AppendPlanned does too).
type ReadPlan = segments.ReadPlan

// PlanRead locates what ReadBatches would return: the stored batches of p from the one that
// contains offset, below limit, up to maxBytes (the first one whatever its size when
// includeFirst is set). plan must be empty (new, or released).
func (l *Log) PlanRead(p *Partition, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error {
	if offset >= limit {
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := l.store.PlanRead(p.ID, offset, limit, maxBytes, includeFirst, plan)
		if err == nil {
			return nil
		}
		plan.Release()
		if !errors.Is(err, errSegmentGone) {
			return err
		}
		if offset < p.LocalLogStartOffset() {
			// Retention (or, on a tiered topic, local retention) removed what this read was
			// after from this node while it ran: as if it had come after.
			return ErrOffsetOutOfRange
		}
		if attempt == 2 {
			return err
		}
		// The batches were copied forward and their old segment reclaimed after this read's
		// index snapshot was taken (reclaim.go): the index names the copies now.
	}
}

// ReadBatches appends to dst the stored batches PlanRead locates: whole stored batches of p,
// starting with the batch containing offset and ending before limit (which the caller takes
// from HighWatermark, or the LSO), up to maxBytes. ErrOffsetOutOfRange: retention moved the
// log start past offset while the read ran.
func (l *Log) ReadBatches(p *Partition, offset, limit int64, maxBytes int, includeFirst bool, dst []byte) ([]byte, error) {
	var plan ReadPlan
	if err := l.PlanRead(p, offset, limit, maxBytes, includeFirst, &plan); err != nil {
		return dst, err
	}
	return l.AppendPlanned(dst, &plan)
}

// AppendPlanned appends the planned batches to dst (growing it at most once) and releases the
// plan. On an error dst is returned as it came.
func (l *Log) AppendPlanned(dst []byte, plan *ReadPlan) ([]byte, error) {
	defer plan.Release()
	return plan.AppendTo(dst)
}

// readStored reads the one stored batch at base (nothing if there is none), without the
// retries of PlanRead: errSegmentGone tells the caller its segment was reclaimed meanwhile.
func (l *Log) readStored(p *Partition, base int64) ([]byte, error) {
	var plan ReadPlan
	if err := l.store.PlanRead(p.ID, base, base+1, 1, true, &plan); err != nil {
		plan.Release()
		return nil, err
	}
	return l.AppendPlanned(nil, &plan)
}

// PlanRead of the Pebble layout: copies of the values.
func (s *pebbleStore) PlanRead(partition uint32, offset, limit int64, maxBytes int, includeFirst bool, plan *ReadPlan) error {
	plan.End = limit
	return segments.EachIndexedBatch(s.db, partition, offset, limit, func(base int64, v []byte) (bool, error) {
		if len(v) < 61 {
			panic("BUG: batchlog: stored batch shorter than a record batch header")
		}
		if wire.BatchLastOffset(v) < offset {
			return true, nil
		}
		if (plan.Bytes > 0 || !includeFirst) && plan.Bytes+len(v) > maxBytes {
			plan.End = base
			return false, nil
		}
		plan.AddCopy(v)
		if plan.Bytes >= maxBytes {
			plan.End = base + 1
			return false, nil
		}
		return true, nil
	})
}
