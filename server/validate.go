package server

import (
	"fmt"
	"strings"

	"inlet/schema"
	"inlet/wire"
)

// validateRecords validates every record of a batch bound to a schema. A batch with any bad
// record is rejected whole: INVALID_RECORD, one RecordErrors entry per failing record (KIP-467,
// Produce v8+; older versions carry only the code), and an error message naming the first
// failing record and why.
func (s *Server) validateRecords(ps *produceState, op *wire.ProduceRespPartition, bound *schema.Topic, batch []byte) (int16, string) {
	var code int16
	ps.recErrs = ps.recErrs[:0]
	wire.WithScratch(func(scratch []byte) []byte {
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
	wire.WithScratch(func(scratch []byte) []byte {
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
