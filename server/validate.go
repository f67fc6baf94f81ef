package server

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"inlet/schema"
	"inlet/wire"
)

// maxPooledScratch drops a decompression buffer that grew past this, so one large compressed
// batch does not pin memory in the pool.
const maxPooledScratch = 4 << 20

// Decompression slots. Every compressed batch is checked as it inflates on the connection's
// worker (validateBatchRecords, and validateKeys for a compacted topic: wire/inflate.go), through
// a window of 64 KiB, and decompressed whole only for a schema (its records are decoded). The
// window comes from a fixed set of slots and goes back at once: what decompression holds is
// the slots' windows (slots x 64 KiB; a snappy batch's buffer, kept up to maxPooledScratch) plus
// what wire's decompression budget lets decompressors and whole batches hold, node-wide
// (wire.InflateBudgetBytes, 64 MiB), whatever the number of connections or requests in flight.
// Decompression is CPU work, so twice GOMAXPROCS slots (at least 4) keep every core busy; a
// worker that finds none free waits (it is not an event loop, and a slot holder waits only on
// the budget, which no slot holder holds while it waits).
var decompressSlots = sync.OnceValue(func() chan *[]byte {
	n := max(4, 2*runtime.GOMAXPROCS(0))
	ch := make(chan *[]byte, n)
	for range n {
		ch <- new([]byte)
	}
	return ch
})

// withScratch runs fn with a decompression buffer from a slot and stores back what fn returns
// (the buffer, possibly grown), dropping it if it grew past maxPooledScratch.
func withScratch(fn func(scratch []byte) []byte) {
	slots := decompressSlots()
	sp := <-slots
	out := fn((*sp)[:0])
	if cap(out) > maxPooledScratch {
		out = nil
	}
	*sp = out
	slots <- sp
}

// validateBatchRecords walks the records of a batch that passed wire.ValidateProduceBatch and
// checks them against its header (wire.ValidateRecords: the count, offset deltas 0..n-1, each
// record's length and fields, nothing left over), as Kafka's LogValidator does by iterating
// them. An uncompressed batch needs no buffer and takes no slot.
func validateBatchRecords(batch []byte, h *wire.BatchHeader) (code int16, msg string) {
	if h.Compression() == wire.CompressionNone {
		_, code, msg = wire.ValidateRecords(batch, h, nil)
		return code, msg
	}
	withScratch(func(scratch []byte) []byte {
		scratch, code, msg = wire.ValidateRecords(batch, h, scratch)
		return scratch
	})
	return code, msg
}

// validateRecords validates every record of a batch bound to a schema. A batch with any bad
// record is rejected whole: INVALID_RECORD, one RecordErrors entry per failing record (KIP-467,
// Produce v8+; older versions carry only the code), and an error message naming the first
// failing record and why.
func (s *Server) validateRecords(ps *produceState, op *wire.ProduceRespPartition, bound *schema.Topic, batch []byte) (int16, string) {
	var code int16
	ps.recErrs = ps.recErrs[:0]
	withScratch(func(scratch []byte) []byte {
		scratch, ps.recErrs, code = bound.ValidateBatch(batch, scratch, ps.recErrs)
		return scratch
	})
	if code == 0 && len(ps.recErrs) == 0 {
		return wire.ErrNone, ""
	}
	if code == 0 {
		code = wire.ErrInvalidRecord
	}
	for _, e := range ps.recErrs {
		op.RecordErrors = append(op.RecordErrors, wire.RecordError{BatchIndex: e.Index, Message: e.Message, HasMessage: true})
	}
	first := ps.recErrs[0].Message
	if n := len(ps.recErrs); n > 1 {
		first = fmt.Sprintf("%s (and %d more records rejected)", first, n-1)
	}
	return code, "batch rejected by topic schema: " + first
}

// maxRecordErrorsInMessage is how many record errors the partition's error message shows, as
// Kafka's ProduceResponse message does ("only showing the first three errors at most").
const maxRecordErrorsInMessage = 3

// validateKeys refuses a batch for a compacted topic (cleanup.policy compact) that holds a
// record without a key, as Kafka's LogValidator.validateKey does: a compacted topic keeps the
// latest record per key, and a keyless one has none. The batch is rejected whole:
// INVALID_RECORD, one RecordErrors entry per keyless record (Produce v8+), and Kafka's
// message. Only compacted topics pay for decoding the records, on the connection's worker.
func (s *Server) validateKeys(ps *produceState, op *wire.ProduceRespPartition, topic []byte, partition int32, batch []byte) (int16, string) {
	h, err := wire.ParseBatchHeader(batch)
	if err != nil {
		return wire.ErrCorruptMessage, err.Error()
	}
	var bad []int32
	var code int16
	var msg string
	keyless := func(i int32) {
		if i < 0 { // read again from the start
			bad = bad[:0]
			return
		}
		bad = append(bad, i)
	}
	withScratch(func(scratch []byte) []byte {
		scratch, code, msg = wire.KeylessRecords(batch, &h, scratch, keyless)
		return scratch
	})
	if code != wire.ErrNone {
		return code, msg
	}
	if len(bad) == 0 {
		return wire.ErrNone, ""
	}
	msg = fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, partition)
	var shown []string
	for _, idx := range bad {
		op.RecordErrors = append(op.RecordErrors, wire.RecordError{BatchIndex: idx, Message: msg, HasMessage: true})
		if len(shown) < maxRecordErrorsInMessage {
			shown = append(shown, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", idx, msg))
		}
	}
	return wire.ErrInvalidRecord, fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
		len(bad), strings.Join(shown, ", "))
}
