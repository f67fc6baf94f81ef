package loadgen

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The abort choice is a counter: exact over every window of 1/f transactions, the same on
// every run, staggered across producers, and all or nothing at the ends.
func TestChosenForAbort(t *testing.T) {
	for k := range uint64(100) {
		if chosenForAbort(3, k, 0) {
			t.Fatalf("fraction 0 chose transaction %d", k)
		}
		if !chosenForAbort(3, k, 1) {
			t.Fatalf("fraction 1 spared transaction %d", k)
		}
	}
	for _, f := range []float64{0.1, 0.2, 0.25, 0.5} {
		window := uint64(1/f + 0.5)
		for index := range uint32(4) {
			for start := range uint64(50) {
				n := 0
				for k := start; k < start+window; k++ {
					if chosenForAbort(index, k, f) {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("fraction %v, producer %d: %d aborts in transactions [%d, %d), want 1", f, index, n, start, start+window)
				}
			}
		}
	}
	// Fractions that do not divide 1 still come out right in the long run.
	n := 0
	for k := range uint64(1000) {
		if chosenForAbort(0, k, 0.33) {
			n++
		}
	}
	if n != 330 {
		t.Fatalf("fraction 0.33: %d of 1000 aborted", n)
	}
	// Producers do not all abort the same transactions.
	same := true
	for k := range uint64(10) {
		if chosenForAbort(0, k, 0.2) != chosenForAbort(1, k, 0.2) {
			same = false
		}
	}
	if same {
		t.Fatal("producers 0 and 1 abort the same transactions")
	}
}

func TestPlanEndAndCommitOutcome(t *testing.T) {
	for _, c := range []struct {
		n, acked        uint64
		flushed, chosen bool
		want            endAction
	}{
		{0, 0, true, false, endEmpty},
		{0, 0, false, true, endEmpty},
		{10, 10, true, false, endCommit},
		{10, 10, true, true, endAbort},   // chosen by the fraction
		{10, 9, true, false, endAbort},   // a record failed
		{10, 10, false, false, endFence}, // flush cut short by the run's abort
		{10, 3, false, true, endFence},
	} {
		if got := planEnd(c.n, c.acked, c.flushed, c.chosen); got != c.want {
			t.Errorf("planEnd(%d, %d, flushed %t, chosen %t) = %d, want %d", c.n, c.acked, c.flushed, c.chosen, got, c.want)
		}
	}
	for _, c := range []struct {
		err  error
		want TxnOutcome
	}{
		{nil, TxnCommitted},
		{kerr.OperationNotAttempted, TxnAborted},
		{fmt.Errorf("wrapped: %w", kerr.OperationNotAttempted), TxnAborted},
		{errors.New("EOF"), TxnInDoubt},
		{kerr.InvalidTxnState, TxnInDoubt},
		{kerr.UnknownServerError, TxnInDoubt},
		{kerr.TransactionAbortable, TxnInDoubt},
	} {
		if got := commitOutcome(c.err); got != c.want {
			t.Errorf("commitOutcome(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// logTxn keeps the transactions in order and counts them by outcome.
func TestLogTxnCounts(t *testing.T) {
	p := newProducer(0, nil, "t", newValues(FormatRaw, 40, 0), 100)
	p.txn = &txnState{records: 10}
	p.logTxn(Txn{First: 0, End: 10, Outcome: TxnCommitted})
	p.logTxn(Txn{First: 10, End: 20, Outcome: TxnAborted, Chosen: true})
	p.logTxn(Txn{First: 20, End: 25, Outcome: TxnAborted})
	p.logTxn(Txn{First: 25, End: 35, Outcome: TxnInDoubt})
	p.logTxn(Txn{First: 35, End: 40, Outcome: TxnCommitted})
	s := p.txn.summary
	want := TxnSummary{Committed: 2, CommittedRecords: 15, Aborted: 2, AbortedChosen: 1, AbortedRecords: 15, InDoubt: 1, InDoubtRecords: 10}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("summary %+v, want %+v", s, want)
	}
	for seq, want := range map[uint64]TxnOutcome{0: TxnCommitted, 9: TxnCommitted, 10: TxnAborted, 24: TxnAborted, 25: TxnInDoubt, 39: TxnCommitted} {
		if x, ok := p.txn.log.find(seq); !ok || x.Outcome != want {
			t.Errorf("seq %d: %+v %t, want %v", seq, x, ok, want)
		}
	}
	if _, ok := p.txn.log.find(40); ok {
		t.Error("seq 40 is in no transaction")
	}
	var total TxnSummary
	p.txnError("commit", errors.New("EOF"))
	total.add(&p.txn.summary)
	total.add(&p.txn.summary)
	if total.Committed != 4 || total.Errors["commit: EOF"] != 2 {
		t.Fatalf("added %+v", total)
	}
}

// txnRun is a transactional run for the verifier: per producer, its transactions and the
// acked sequence numbers.
type txnRun struct {
	txns  []TxnLog
	acked [][]uint64
}

func (r txnRun) verifier() *Verifier {
	sent := make([]uint64, len(r.txns))
	bitmaps := make([]*Bitmap, len(r.txns))
	for p, log := range r.txns {
		if len(log) > 0 {
			sent[p] = log[len(log)-1].End
		}
		bitmaps[p] = NewBitmap()
		for _, seq := range r.acked[p] {
			bitmaps[p].Set(seq)
		}
	}
	return NewTxnVerifier(NewValueDecoder(testRecordSize), 2, sent, bitmaps, r.txns)
}

func seqs(lo, hi uint64) []uint64 {
	var out []uint64
	for s := lo; s < hi; s++ {
		out = append(out, s)
	}
	return out
}

// Producer 0: [0,4) committed, [4,8) aborted (chosen), [8,12) in doubt. Producer 1: [0,3)
// aborted after record 1 failed, [3,6) committed. Every record acked except producer 1's 1.
func sampleTxnRun() txnRun {
	return txnRun{
		txns: []TxnLog{
			{{0, 4, TxnCommitted, false}, {4, 8, TxnAborted, true}, {8, 12, TxnInDoubt, false}},
			{{0, 3, TxnAborted, false}, {3, 6, TxnCommitted, false}},
		},
		acked: [][]uint64{seqs(0, 12), {0, 2, 3, 4, 5}},
	}
}

func committedOnly() []record {
	return []record{{0, 0, 0}, {1, 0, 1}, {0, 0, 2}, {1, 0, 3}, {0, 1, 3}, {1, 1, 4}, {0, 1, 5}}
}

func TestTxnVerifyCommittedOnceInDoubtAbsentIsOK(t *testing.T) {
	v := sampleTxnRun().verifier()
	observe(v, committedOnly()...)
	r := v.Result()
	if !r.OK || r.Mode != ModeTransactional || r.Lost != 0 || r.Found != 7 || r.Acked != 17 || len(r.Mismatches) != 0 {
		t.Fatalf("%+v", r)
	}
	want := TxnVerify{Committed: 2, CommittedRecords: 7, Aborted: 2, AbortedRecords: 7, InDoubt: 1, InDoubtRecords: 4,
		InDoubtAborted: 1}
	if *r.Txn != want {
		t.Fatalf("txn %+v, want %+v", *r.Txn, want)
	}
	if r.Verdict() != "exactly once, transactional: ok" {
		t.Fatalf("verdict %q", r.Verdict())
	}
}

func TestTxnVerifyInDoubtReadWholeIsOK(t *testing.T) {
	v := sampleTxnRun().verifier()
	observe(v, append(committedOnly(), record{1, 0, 8}, record{1, 0, 9}, record{0, 0, 10}, record{0, 0, 11})...)
	r := v.Result()
	if !r.OK || r.Txn.InDoubtCommitted != 1 || r.Txn.InDoubtAborted != 0 || r.Found != 11 {
		t.Fatalf("%+v %+v", r, r.Txn)
	}
}

func TestTxnVerifyInDoubtReadInPartFails(t *testing.T) {
	v := sampleTxnRun().verifier()
	observe(v, append(committedOnly(), record{1, 0, 8}, record{1, 0, 10})...)
	r := v.Result()
	if r.OK || r.Txn.Partial != 1 || r.Lost != 0 {
		t.Fatalf("%+v %+v", r, r.Txn)
	}
	if len(r.Mismatches) != 1 || r.Mismatches[0].Kind != Partial || r.Mismatches[0].Seq != 8 ||
		!strings.Contains(r.Mismatches[0].String(), "2 of its 4 acknowledged records read") {
		t.Fatalf("mismatches %v", r.Mismatches)
	}
}

func TestTxnVerifyInDoubtReadTwiceFails(t *testing.T) {
	v := sampleTxnRun().verifier()
	in := []record{{1, 0, 8}, {1, 0, 9}, {0, 0, 10}, {0, 0, 11}, {1, 0, 9}}
	observe(v, append(committedOnly(), in...)...)
	r := v.Result()
	if r.OK || r.Duplicates != 1 || r.Txn.InDoubtCommitted != 1 {
		t.Fatalf("%+v %+v", r, r.Txn)
	}
}

func TestTxnVerifyAbortedRecordVisibleFails(t *testing.T) {
	// An acked record of a chosen abort, and the failed record of an aborted transaction.
	for _, extra := range []record{{0, 0, 5}, {1, 1, 1}} {
		v := sampleTxnRun().verifier()
		observe(v, append(committedOnly(), extra)...)
		r := v.Result()
		if r.OK || r.Txn.AbortedVisible != 1 || r.Found != 7 || r.Duplicates != 0 {
			t.Fatalf("%v: %+v %+v", extra, r, r.Txn)
		}
		if len(r.Mismatches) != 1 || r.Mismatches[0].Kind != AbortedVisible || r.Mismatches[0].Seq != extra.seq {
			t.Fatalf("%v: mismatches %v", extra, r.Mismatches)
		}
	}
}

func TestTxnVerifyLostCommittedRecordFails(t *testing.T) {
	v := sampleTxnRun().verifier()
	recs := committedOnly()
	observe(v, append(recs[:2:2], recs[3:]...)...) // producer 0 seq 2 missing
	r := v.Result()
	if r.OK || r.Lost != 1 || len(r.Mismatches) != 1 || r.Mismatches[0].Kind != Lost || r.Mismatches[0].Seq != 2 {
		t.Fatalf("%+v", r)
	}
}

func TestTxnVerifyAnythingElseFails(t *testing.T) {
	for name, extra := range map[string]record{
		"never sent":       {0, 0, 12},
		"unknown producer": {0, 2, 0},
	} {
		v := sampleTxnRun().verifier()
		observe(v, append(committedOnly(), extra)...)
		if r := v.Result(); r.OK || r.Unknown != 1 {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	// A record in no transaction (a gap in the log) cannot be judged: it fails too.
	r := sampleTxnRun()
	r.txns[0] = TxnLog{{0, 4, TxnCommitted, false}, {8, 12, TxnInDoubt, false}}
	v := r.verifier()
	observe(v, append(committedOnly(), record{0, 0, 5})...)
	if res := v.Result(); res.OK || res.Unknown != 1 || !strings.Contains(res.Mismatches[0].String(), "in no transaction") {
		t.Fatalf("gap: %+v", res)
	}
}

func TestBitmapCountAndCopyRange(t *testing.T) {
	b := NewBitmap()
	for _, s := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, bitmapChunkBits - 1, bitmapChunkBits, bitmapChunkBits + 5} {
		b.Set(s)
	}
	for _, c := range []struct{ lo, hi, want uint64 }{
		{0, 0, 0}, {0, 1, 1}, {0, 2, 2}, {1, 63, 1}, {1, 64, 2}, {63, 66, 3}, {64, 128, 3}, {65, 129, 3},
		{129, 1000, 0}, {129, 1001, 1}, {0, 2 * bitmapChunkBits, 11}, {bitmapChunkBits - 1, bitmapChunkBits + 1, 2},
	} {
		if got := b.CountRange(c.lo, c.hi); got != c.want {
			t.Errorf("CountRange(%d, %d) = %d, want %d", c.lo, c.hi, got, c.want)
		}
	}
	c := NewBitmap()
	c.copyRange(b, 63, 129)
	c.copyRange(b, bitmapChunkBits, bitmapChunkBits+1)
	if c.CountBelow(BitmapCapacity) != 6 || !c.Has(63) || !c.Has(128) || c.Has(1) || c.Has(1000) || !c.Has(bitmapChunkBits) {
		t.Fatalf("copyRange copied %d", c.CountBelow(BitmapCapacity))
	}
}

func TestTransactionalConfig(t *testing.T) {
	s, err := Config{Transactional: true, Idempotent: true, Producers: 4}.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Transactional || s.TransactionalIDs != "loadgen-<run id>-{i}" || s.TxnRecords != DefaultTxnRecords ||
		s.TxnAbortFraction != 0 || s.TxnTimeout != txnTimeout {
		t.Fatalf("settings %+v", s)
	}
	var b strings.Builder
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	if want := "transactional          ids loadgen-<run id>-{i} (i = 0..3), 10000 records each, 0 aborted by choice, timeout 40s"; !strings.Contains(b.String(), want) {
		t.Errorf("settings output lacks %q:\n%s", want, b.String())
	}
	for name, cfg := range map[string]Config{
		"plain transactional":      {Transactional: true},
		"txn records without txn":  {Idempotent: true, TxnRecords: 5},
		"abort fraction alone":     {Idempotent: true, TxnAbortFraction: 0.5},
		"prefix alone":             {Idempotent: true, TransactionalIDPrefix: "x"},
		"abort fraction above one": {Idempotent: true, Transactional: true, TxnAbortFraction: 1.5},
		"negative abort fraction":  {Idempotent: true, Transactional: true, TxnAbortFraction: -0.1},
		"negative txn records":     {Idempotent: true, Transactional: true, TxnRecords: -1},
	} {
		if _, err := cfg.Settings(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg, err := Config{Transactional: true, Idempotent: true, TransactionalIDPrefix: "p", TxnRunID: "run"}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(cfg.producerOpts(3)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.TransactionalID); got != "p-run-3" {
		t.Errorf("transactional id %v", got)
	}
	if got := cl.OptValue(kgo.TransactionTimeout); got != txnTimeout {
		t.Errorf("transaction timeout %v", got)
	}
}
