package server

import (
	"fmt"

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
