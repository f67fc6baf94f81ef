package wire

import (
	"runtime"
	"sync"
)

// maxPooledScratch drops a decompression buffer that grew past this, so one large compressed
// batch does not pin memory in the pool.
const maxPooledScratch = 4 << 20

// Decompression slots. Every compressed batch is checked as it inflates on the connection's
// worker (ValidateBatchRecords, and the server's checks of compacted topics' keys and of
// schemas: inflate.go), through a window of 64 KiB, and decompressed whole only for a schema
// (its records are decoded). The window comes from a fixed set of slots and goes back at once:
// what decompression holds is the slots' windows (slots x 64 KiB; a snappy batch's buffer, kept
// up to maxPooledScratch) plus what the decompression budget lets decompressors and whole
// batches hold, node-wide (InflateBudgetBytes, 64 MiB), whatever the number of connections or
// requests in flight. Decompression is CPU work, so twice GOMAXPROCS slots (at least 4) keep
// every core busy; a worker that finds none free waits (it is not an event loop, and a slot
// holder waits only on the budget, which no slot holder holds while it waits).
var decompressSlots = sync.OnceValue(func() chan *[]byte {
	n := max(4, 2*runtime.GOMAXPROCS(0))
	ch := make(chan *[]byte, n)
	for range n {
		ch <- new([]byte)
	}
	return ch
})

// WithScratch runs fn with a decompression buffer from a slot and stores back what fn returns
// (the buffer, possibly grown), dropping it if it grew past maxPooledScratch.
func WithScratch(fn func(scratch []byte) []byte) {
	slots := decompressSlots()
	sp := <-slots
	out := fn((*sp)[:0])
	if cap(out) > maxPooledScratch {
		out = nil
	}
	*sp = out
	slots <- sp
}

// ValidateBatchRecords walks the records of a batch that passed ValidateProduceBatch and
// checks them against its header (ValidateRecords: the count, offset deltas 0..n-1, each
// record's length and fields, nothing left over), as Kafka's LogValidator does by iterating
// them. An uncompressed batch needs no buffer and takes no slot.
func ValidateBatchRecords(batch []byte, h *BatchHeader) (code int16, msg string) {
	if h.Compression() == CompressionNone {
		_, code, msg = ValidateRecords(batch, h, nil)
		return code, msg
	}
	WithScratch(func(scratch []byte) []byte {
		scratch, code, msg = ValidateRecords(batch, h, scratch)
		return scratch
	})
	return code, msg
}
