package loadgen

import (
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// Verifier holds the accounting of a verification: what the producers sent and had
// acknowledged, and what was read back. It does no I/O, so the rules are tested by feeding it
// values directly. It is not safe for concurrent use.
//
// The rules:
//   - every acknowledged record must be read back (else "lost");
//   - exactly once (idempotent producers): no record, acknowledged or not, may be read twice,
//     and each producer's records must appear in sequence order within a partition, which
//     Kafka guarantees idempotent producers;
//   - at least once (plain producers): duplicates and reordering are reported, not failures;
//   - a record that failed on the producer side yet was stored ("unacked but present": the
//     broker wrote it and the answer was lost) is reported, never a failure;
//   - a value that does not decode (in the run's value format), or names a producer or sequence number this run never
//     sent, fails the run in both modes.
//
// Transactional producers (NewTxnVerifier) are checked exactly once, and every record is
// judged by the outcome of its transaction (txn.go); the records are read with read_committed:
//   - committed: every acknowledged record of the transaction (all of them: a commit is only
//     attempted when all were acknowledged) must be read exactly once, in order, like an
//     idempotent producer's;
//   - aborted: no record of it, acknowledged or failed, may be read at all (each copy read
//     is "aborted but visible"), whether or not the EndTransaction that aborted it returned
//     an error;
//   - in doubt (the commit was attempted and EndTransaction returned an error): each record
//     may be read at most once, and the transaction must be atomic: if any of its records is
//     read, every acknowledged record of it must be (else "partial"). Each in-doubt
//     transaction is reported as resolved committed (all read) or aborted (none read);
//   - anything else read (malformed, or a producer or sequence number never sent) fails, as
//     without transactions.
type Verifier struct {
	exactlyOnce bool
	decoder     Decoder
	sent        []uint64  // per producer: sequence numbers 0..sent-1 were handed to kgo
	acked       []*Bitmap // per producer
	// required holds, per producer, the records that must be read: acked, or, transactional,
	// the acked records of committed transactions.
	required []*Bitmap
	// txns are the producers' transactions; nil without transactions.
	txns []TxnLog
	seen []*Bitmap // per producer
	// nextSeq[producer][partition] is one past the highest sequence read so far from that
	// producer on that partition; a first sighting below it is out of order.
	nextSeq [][]uint64

	read, duplicates, outOfOrder, malformed, unknown, abortedVisible uint64

	examples map[MismatchKind][]Mismatch
}

// MismatchKind names what went wrong with one record.
type MismatchKind string

const (
	Lost       MismatchKind = "lost"         // acknowledged (and committed), never read back
	Duplicated MismatchKind = "duplicated"   // read back more than once
	OutOfOrder MismatchKind = "out of order" // read after a later record of the same producer and partition
	Malformed  MismatchKind = "malformed"    // value does not decode
	Unknown    MismatchKind = "unknown"      // decodes, but this run never sent it

	// AbortedVisible: a record of an aborted transaction was read with read_committed.
	AbortedVisible MismatchKind = "aborted but visible"
	// Partial: some records of an in-doubt transaction were read and some acknowledged ones
	// were not. Seq is the transaction's first sequence number.
	Partial MismatchKind = "partial transaction"
)

// mismatchKinds fixes the order in which examples are listed: the worst first.
var mismatchKinds = []MismatchKind{Lost, AbortedVisible, Partial, Malformed, Unknown, Duplicated, OutOfOrder}

// MaxMismatches bounds the examples a VerifyResult lists.
const MaxMismatches = 20

// Mismatch is one example of a failed or suspicious record. Partition and Offset are -1 for a
// lost record, which by definition was found nowhere.
type Mismatch struct {
	Kind      MismatchKind `json:"kind"`
	Producer  uint32       `json:"producer"`
	Seq       uint64       `json:"seq"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Detail    string       `json:"detail,omitempty"`
}

func (m Mismatch) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: producer %d seq %d", m.Kind, m.Producer, m.Seq)
	if m.Partition >= 0 {
		fmt.Fprintf(&b, " at partition %d offset %d", m.Partition, m.Offset)
	}
	if m.Detail != "" {
		fmt.Fprintf(&b, " (%s)", m.Detail)
	}
	return b.String()
}

// NewVerifier prepares the accounting for a run of len(sent) producers over partitions
// partitions, reading values with dec (NewDecoder). exactlyOnce selects the idempotent rules.
// acked[i] must hold every acknowledged sequence number of producer i (all below sent[i]); the
// verifier only reads it.
func NewVerifier(exactlyOnce bool, dec Decoder, partitions int, sent []uint64, acked []*Bitmap) *Verifier {
	if len(sent) != len(acked) {
		panic(fmt.Sprintf("BUG: loadgen verifier has %d sent counts for %d acked bitmaps", len(sent), len(acked)))
	}
	v := &Verifier{
		exactlyOnce: exactlyOnce,
		decoder:     dec,
		sent:        sent,
		acked:       acked,
		required:    acked,
		seen:        make([]*Bitmap, len(sent)),
		nextSeq:     make([][]uint64, len(sent)),
		examples:    make(map[MismatchKind][]Mismatch),
	}
	for i := range sent {
		v.seen[i] = NewBitmap()
		v.nextSeq[i] = make([]uint64, partitions)
	}
	return v
}

// NewTxnVerifier is NewVerifier for transactional producers: txns[i] is producer i's
// transactions, which must tile its sequence numbers [0, sent[i]) (a record in no transaction
// is reported as unknown). The rules are exactly once, by transaction outcome (see Verifier).
func NewTxnVerifier(dec Decoder, partitions int, sent []uint64, acked []*Bitmap, txns []TxnLog) *Verifier {
	if len(txns) != len(sent) {
		panic(fmt.Sprintf("BUG: loadgen verifier has %d sent counts for %d transaction logs", len(sent), len(txns)))
	}
	v := NewVerifier(true, dec, partitions, sent, acked)
	v.txns = txns
	v.required = make([]*Bitmap, len(sent))
	for p, log := range txns {
		v.required[p] = NewBitmap()
		for _, t := range log {
			if t.Outcome == TxnCommitted {
				v.required[p].copyRange(acked[p], t.First, min(t.End, sent[p]))
			}
		}
	}
	return v
}

func (v *Verifier) note(m Mismatch) {
	if len(v.examples[m.Kind]) < MaxMismatches {
		v.examples[m.Kind] = append(v.examples[m.Kind], m)
	}
}

// Observe accounts for one record read back from partition at offset.
func (v *Verifier) Observe(partition int32, offset int64, value []byte) {
	v.read++
	producer, seq, err := v.decoder.Decode(value)
	if err != nil {
		v.malformed++
		v.note(Mismatch{Kind: Malformed, Partition: partition, Offset: offset,
			Detail: strings.TrimPrefix(err.Error(), ErrMalformedValue.Error()+": ")})
		return
	}
	if int(producer) >= len(v.sent) || seq >= v.sent[producer] {
		v.unknown++
		v.note(Mismatch{Kind: Unknown, Producer: producer, Seq: seq, Partition: partition, Offset: offset})
		return
	}
	if v.txns != nil {
		t, ok := v.txns[producer].find(seq)
		switch {
		case !ok:
			v.unknown++
			v.note(Mismatch{Kind: Unknown, Producer: producer, Seq: seq, Partition: partition, Offset: offset,
				Detail: "in no transaction"})
			return
		case t.Outcome == TxnAborted:
			// Every copy counts; aborted records are not marked seen, so Found and the
			// order check cover only records that may be visible.
			v.abortedVisible++
			v.note(Mismatch{Kind: AbortedVisible, Producer: producer, Seq: seq, Partition: partition, Offset: offset,
				Detail: fmt.Sprintf("transaction [%d, %d)", t.First, t.End)})
			return
		}
	}
	if v.seen[producer].Set(seq) {
		v.duplicates++
		v.note(Mismatch{Kind: Duplicated, Producer: producer, Seq: seq, Partition: partition, Offset: offset,
			Detail: "second or later copy"})
		return
	}
	// A duplicate is already counted once; only first sightings are checked for order.
	if partition >= 0 && int(partition) < len(v.nextSeq[producer]) {
		next := &v.nextSeq[producer][partition]
		if seq < *next {
			v.outOfOrder++
			v.note(Mismatch{Kind: OutOfOrder, Producer: producer, Seq: seq, Partition: partition, Offset: offset,
				Detail: fmt.Sprintf("after seq %d", *next-1)})
		} else {
			*next = seq + 1
		}
	}
}

// VerifyResult is the outcome of reading a run's records back.
type VerifyResult struct {
	// Mode is "exactly once" for idempotent producers, "at least once" for plain ones and
	// ModeTransactional for transactional ones.
	Mode string `json:"mode"`
	OK   bool   `json:"ok"`
	// Error is set when verification could not finish (the broker would not serve the
	// records); OK is then false.
	Error string `json:"error,omitempty"`

	Acked          uint64 `json:"acked"`           // records the producers had acknowledged
	Read           uint64 `json:"read"`            // records read back, copies included
	Found          uint64 `json:"found"`           // distinct records read back
	Lost           uint64 `json:"lost"`            // acknowledged and not found
	Duplicates     uint64 `json:"duplicates"`      // copies beyond the first
	OutOfOrder     uint64 `json:"out_of_order"`    // first copies read after a later sequence
	UnackedPresent uint64 `json:"unacked_present"` // failed on the producer, stored anyway
	Malformed      uint64 `json:"malformed"`
	Unknown        uint64 `json:"unknown"`

	// Transactional runs only. Acked then still counts every acknowledged record, those of
	// aborted transactions included; Lost counts acknowledged records of committed
	// transactions not read; Found, Duplicates and OutOfOrder count records of committed and
	// in-doubt transactions (a record of an aborted one read is counted in Txn.AbortedVisible
	// only).
	Txn *TxnVerify `json:"txn,omitempty"`

	// Mismatches lists up to MaxMismatches examples, a share of each kind, worst kinds first.
	Mismatches []Mismatch `json:"mismatches,omitempty"`

	Ranges   []PartitionRange `json:"ranges,omitempty"` // what was read, per partition
	Duration time.Duration    `json:"duration_ns"`
}

// TxnVerify is the transactional part of a VerifyResult.
type TxnVerify struct {
	Committed        uint64 `json:"committed"`         // committed transactions
	CommittedRecords uint64 `json:"committed_records"` // their acknowledged records: each must be read once
	Aborted          uint64 `json:"aborted"`           // aborted transactions
	AbortedRecords   uint64 `json:"aborted_records"`   // their records: none may be read
	AbortedVisible   uint64 `json:"aborted_visible"`   // copies of them read (failures)
	InDoubt          uint64 `json:"in_doubt"`          // transactions whose commit outcome is unknown
	InDoubtRecords   uint64 `json:"in_doubt_records"`
	// Each in-doubt transaction is read back whole (resolved committed), not at all
	// (resolved aborted) or in part (Partial, a failure).
	InDoubtCommitted uint64 `json:"in_doubt_committed"`
	InDoubtAborted   uint64 `json:"in_doubt_aborted"`
	Partial          uint64 `json:"partial"`
}

// ModeTransactional is the VerifyResult.Mode of transactional producers.
const ModeTransactional = "exactly once, transactional"

// PartitionRange is the offsets [Start, End) that verification read from one partition.
type PartitionRange struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// Result computes the verdict from everything observed so far.
func (v *Verifier) Result() VerifyResult {
	r := VerifyResult{
		Mode:       "at least once",
		Read:       v.read,
		Duplicates: v.duplicates,
		OutOfOrder: v.outOfOrder,
		Malformed:  v.malformed,
		Unknown:    v.unknown,
	}
	if v.exactlyOnce {
		r.Mode = "exactly once"
	}
	var partial []Mismatch
	if v.txns != nil {
		r.Mode = ModeTransactional
		r.Txn, partial = v.txnResult()
	}
	var lost []Mismatch
	for p, n := range v.sent {
		r.Acked += v.acked[p].CountBelow(n)
		r.Found += v.seen[p].CountBelow(n)
		eachDifference(v.required[p], v.seen[p], n, func(seq uint64) bool {
			r.Lost++
			if len(lost) < MaxMismatches {
				lost = append(lost, Mismatch{Kind: Lost, Producer: uint32(p), Seq: seq, Partition: -1, Offset: -1})
			}
			return true
		})
		eachDifference(v.seen[p], v.acked[p], n, func(uint64) bool {
			r.UnackedPresent++
			return true
		})
	}
	examples := make(map[MismatchKind][]Mismatch, len(v.examples)+1)
	for k, ms := range v.examples {
		examples[k] = ms
	}
	examples[Lost] = lost
	examples[Partial] = partial
	r.Mismatches = pickExamples(examples)

	r.OK = r.Lost == 0 && r.Malformed == 0 && r.Unknown == 0
	if v.exactlyOnce {
		r.OK = r.OK && r.Duplicates == 0 && r.OutOfOrder == 0
	}
	if r.Txn != nil {
		r.OK = r.OK && r.Txn.AbortedVisible == 0 && r.Txn.Partial == 0
	}
	return r
}

// txnResult counts the transactions by outcome and resolves the in-doubt ones from what was
// read, returning examples of partial ones.
func (v *Verifier) txnResult() (*TxnVerify, []Mismatch) {
	t := &TxnVerify{AbortedVisible: v.abortedVisible}
	var partial []Mismatch
	for p, log := range v.txns {
		for _, x := range log {
			end := min(x.End, v.sent[p])
			if x.First >= end {
				continue
			}
			switch x.Outcome {
			case TxnCommitted:
				t.Committed++
				t.CommittedRecords += v.required[p].CountRange(x.First, end)
			case TxnAborted:
				t.Aborted++
				t.AbortedRecords += end - x.First
			case TxnInDoubt:
				t.InDoubt++
				t.InDoubtRecords += end - x.First
				acked, seen := v.acked[p].CountRange(x.First, end), v.seen[p].CountRange(x.First, end)
				var seenAcked uint64
				rangeWords(x.First, end, func(w, mask uint64) {
					seenAcked += uint64(bits.OnesCount64(v.acked[p].word(w) & v.seen[p].word(w) & mask))
				})
				switch {
				case seen == 0:
					t.InDoubtAborted++
				case seenAcked == acked:
					t.InDoubtCommitted++
				default:
					t.Partial++
					if len(partial) < MaxMismatches {
						partial = append(partial, Mismatch{Kind: Partial, Producer: uint32(p), Seq: x.First,
							Partition: -1, Offset: -1, Detail: fmt.Sprintf("transaction [%d, %d): %d of its %d acknowledged records read",
								x.First, x.End, seenAcked, acked)})
					}
				}
			}
		}
	}
	return t, partial
}

// pickExamples takes examples round-robin across kinds, worst kinds first, so one abundant
// kind cannot hide the others.
func pickExamples(byKind map[MismatchKind][]Mismatch) []Mismatch {
	var out []Mismatch
	for i := 0; len(out) < MaxMismatches; i++ {
		added := false
		for _, k := range mismatchKinds {
			if ms := byKind[k]; i < len(ms) && len(out) < MaxMismatches {
				out = append(out, ms[i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return out
}

// Verdict is the one-line outcome the command prints.
func (r *VerifyResult) Verdict() string {
	switch {
	case !r.OK:
		return r.Mode + ": FAILED"
	case r.Mode == "at least once":
		return fmt.Sprintf("%s: ok (%d duplicates)", r.Mode, r.Duplicates)
	default:
		return r.Mode + ": ok"
	}
}
