package diskless

import (
	"encoding/binary"
	"errors"
	"fmt"

	"inlet/batchlog"
	"inlet/wire"
)

// A node's own disk may hold batches the bucket does not: written and synced locally, never
// PUT (never acknowledged). Recover uploads them when the bucket's log ends where they begin.
// But if another node took the prefix meanwhile (this one was paused past its lease, or cut
// off, and then stopped), the next writer gave those offsets to other batches, which it did
// acknowledge: the local tail and the bucket's log diverge. A start on that disk must not take
// its own tail for the bucket's batches ("held locally already") and serve it in their place.
//
// So each batch of the bucket's log that the local log claims to hold is compared with the
// local one (checkHeld): the same length and CRC-32C (which covers the batch from its
// attributes on: producer, sequence, records), or the start stops with ErrDiverged. A node
// whose disk diverged is started again on an empty data directory with --restore-from-remote.
// Batches below the local log start (dropped by local retention once in the bucket) are not
// compared: nothing of them is served from the local disk.

// ErrDiverged: the local log holds other batches than the bucket's log at offsets both hold.
var ErrDiverged = errors.New("diskless: the data directory diverges from the bucket's commit log (another writer took the prefix after this disk's last write); start this node on an empty data directory with --restore-from-remote")

// checkHeld compares the bucket's batch at base of p with the local log's, reading into
// scratch (returned, for the next call).
func checkHeld(l *batchlog.Log, p *batchlog.Partition, base int64, batch, scratch []byte) ([]byte, error) {
	if base < p.LocalLogStartOffset() {
		return scratch, nil
	}
	local, err := l.ReadBatches(p, base, base+1, 1, true, scratch[:0])
	if err != nil {
		return scratch, fmt.Errorf("diskless: reading %s partition %d at %d to compare it with the bucket's: %w", p.Topic, p.Index, base, err)
	}
	lh, err := wire.ParseBatchHeader(local)
	if err != nil || lh.BaseOffset != base || len(local) < int(lh.BatchLength)+12 || len(batch) < wire.RecordBatchOverhead {
		return local, fmt.Errorf("%w: %s partition %d holds no batch at %d", ErrDiverged, p.Topic, p.Index, base)
	}
	const crcAt = 17 // baseOffset 8, batchLength 4, partitionLeaderEpoch 4, magic 1
	if int(lh.BatchLength)+12 != len(batch) || binary.BigEndian.Uint32(local[crcAt:]) != binary.BigEndian.Uint32(batch[crcAt:]) {
		return local, fmt.Errorf("%w: %s partition %d at offset %d", ErrDiverged, p.Topic, p.Index, base)
	}
	return local, nil
}
