package server

import (
	"fmt"
	"strings"

	"inlet/schema"
	"inlet/wire"
)

// maxPooledScratch drops a decompression scratch buffer that grew past this, so one large
// compressed batch does not pin memory in every pooled request.
const maxPooledScratch = 4 << 20

// validateRecords validates every record of a batch bound to a schema. A batch with any bad
// record is rejected whole: INVALID_RECORD, one RecordErrors entry per failing record (KIP-467,
// Produce v8+; older versions carry only the code), and an error message naming the first
// failing record and why.
func (s *Server) validateRecords(ps *produceState, op *wire.ProduceRespPartition, bound *schema.Topic, batch []byte) (int16, string) {
	var code int16
	ps.recErrs = ps.recErrs[:0]
	ps.scratch, ps.recErrs, code = bound.ValidateBatch(batch, ps.scratch, ps.recErrs)
	if cap(ps.scratch) > maxPooledScratch {
		ps.scratch = nil
	}
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
	var bad []int32
	i := int32(0)
	scratch, err := wire.ForEachRecord(batch, ps.scratch, func(rec wire.Record) error {
		if rec.Key == nil {
			bad = append(bad, i)
		}
		i++
		return nil
	})
	ps.scratch = scratch
	if cap(ps.scratch) > maxPooledScratch {
		ps.scratch = nil
	}
	if err != nil {
		code := wire.RecordsErrorCode(err)
		if code == wire.ErrNone {
			code = wire.ErrInvalidRecord
		}
		return code, err.Error()
	}
	if len(bad) == 0 {
		return wire.ErrNone, ""
	}
	msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, partition)
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
