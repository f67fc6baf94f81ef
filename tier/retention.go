package tier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"inlet/batchlog"
	"inlet/meta"
)

// Total retention of a tiered topic (retention.ms and retention.bytes count both tiers; the
// local bounds, local.retention.*, are package upkeep's): from the front of a partition's
// recorded objects, an object goes when
//
//   - it ends at or below the log start (DeleteRecords, or the time retention of the local
//     batches, moved the log start past it), or
//   - retention.ms >= 0 and its newest batch is older than now - retention.ms, or
//   - retention.bytes >= 0 and the partition, counted as the remote objects' batches plus the
//     local batches past the last object, stays at or above retention.bytes without it.
//
// Order: the log start moves past the objects first (readers stop asking for them), then each
// object's record is deleted (synced), then the object. A crash between the last two leaves an
// orphan, which the next clean deletes.

// retain runs total retention on every tiered partition.
func (t *Tier) retain(ctx context.Context, now time.Time) error {
	var errs []error
	for _, tp := range t.tiered() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := t.retainPartition(ctx, tp, now.UnixMilli()); err != nil {
			errs = append(errs, fmt.Errorf("tier: retention %s/%d: %w", tp.topic.Name, tp.p.Index, err))
		}
	}
	return errors.Join(errs...)
}

func (t *Tier) retainPartition(ctx context.Context, tp tieredPartition, nowMs int64) error {
	p, st := tp.p, tp.topic.Settings
	objs := t.objectsOf(p.ID)
	if len(objs) == 0 {
		return nil
	}
	var total int64
	if st.RetentionBytes >= 0 {
		for _, o := range objs {
			total += o.DataLen
		}
		err := t.log.IndexedBatches(p, objs[len(objs)-1].End, p.HighWatermark(), func(_ int64, size int) bool {
			total += int64(size)
			return true
		})
		if err != nil {
			return err
		}
	}
	n := 0
	for _, o := range objs {
		expired := o.End <= p.LogStartOffset()
		if !expired && st.Delete && st.RetentionMs >= 0 && o.MaxTimestamp < nowMs-st.RetentionMs {
			expired = true
		}
		if !expired && st.Delete && st.RetentionBytes >= 0 && total-o.DataLen >= st.RetentionBytes {
			expired = true
		}
		if !expired {
			break
		}
		total -= o.DataLen
		n++
	}
	if n == 0 {
		return nil
	}
	return t.dropFront(ctx, p, objs[:n])
}

// dropFront deletes the first objects of p (objs, in order): the log start first, then the
// records, then the objects.
func (t *Tier) dropFront(ctx context.Context, p *batchlog.Partition, objs []meta.RemoteObject) error {
	if !t.writable() {
		return errNotWriter
	}
	start := objs[len(objs)-1].End
	if start > p.LogStartOffset() {
		err := t.log.RunPass(func(ps *batchlog.Pass) error { return ps.AdvanceLogStart(p, start) })
		if err != nil {
			return err
		}
	}
	ps := t.part(p.ID)
	for _, o := range objs {
		if !t.writable() {
			return errNotWriter
		}
		if err := t.meta.DeleteRemoteObject(o.Partition, o.Base); err != nil {
			return err
		}
		ps.mu.Lock()
		if len(ps.objects) > 0 && ps.objects[0].Base == o.Base {
			ps.objects = ps.objects[1:]
		}
		ps.mu.Unlock()
		t.cache.forget(o.Key)
		cctx, cancel, err := t.writeCtx(ctx)
		if err != nil {
			return err // an orphan now: the next clean deletes it
		}
		err = t.bucket.Delete(cctx, o.Key)
		cancel()
		if err != nil {
			return err // an orphan now: the next clean deletes it
		}
		t.stats.deletedObjects.Add(1)
	}
	return nil
}
