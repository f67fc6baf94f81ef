package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactional producers (Config.Transactional).
//
// Each producer has its own transactional id and wraps its records in transactions of
// TxnRecords records: BeginTransaction, Produce, and every TxnRecords records Flush and
// EndTransaction. A producer's sequence numbers are dense, so each transaction is a range of
// them, [First, End), and the ranges of a producer tile [0, sent): the bookkeeping is one Txn per
// transaction, and the verifier finds a record's transaction by binary search.
//
// Outcomes. A transaction ends in exactly one of three ways, decided on the producer's own
// goroutine from what kgo reported:
//
//   - TxnCommitted: EndTransaction(TryCommit) returned nil. The commit is attempted only when
//     Flush returned and every record of the transaction was acknowledged, so every record of
//     a committed transaction must be read back exactly once.
//   - TxnAborted: the producer never asked the broker to commit it. Either it was chosen for
//     abort (TxnAbortFraction), or a record of it failed, or Flush did not finish, or
//     EndTransaction(TryCommit) answered kerr.OperationNotAttempted (kgo refused before sending
//     anything: the producer id had failed). The producer ends it with
//     EndTransaction(TryAbort), and after any error also fences it (see below). Whether or
//     not the abort call succeeds, a transaction that was never sent a commit cannot commit,
//     so none of its records may be read with read_committed: not the acknowledged ones, and
//     not the failed ones that the broker may have stored anyway.
//   - TxnInDoubt: EndTransaction(TryCommit) returned any other error. The EndTxn request may
//     have reached the broker and committed, or not (the broker was killed before, during or
//     after it; kgo retried it on a new connection; the answer was lost). kgo's documented
//     recovery is EndTransaction(TryAbort), which re-initialises the producer id: the broker
//     then aborts the transaction if it is still open, or finishes the commit if it had
//     decided to commit. The outcome is therefore unknown to the producer, and the verifier
//     accepts both: each record of an in-doubt transaction may be read at most once, and the
//     transaction must be atomic, either all its acknowledged records are read or none is
//     (Kafka's guarantee, and Inlet's: "never half visible").
//
// Error handling follows kgo's documentation of EndTransaction and BeginTransaction: after an
// error, EndTransaction(TryAbort) is the retry; BeginTransaction fails when the producer id is
// in a fatal state, and then the client is closed and a new one with the same transactional id
// is created. The new client's InitProducerId fences the old epoch, and the broker aborts the
// old client's open transaction (or completes the one it had decided), so nothing of a
// transaction that the producer recorded as aborted can become visible later.
//
// A transaction that saw any error (a failed record, a failed commit, a failed abort) is also
// fenced that way once EndTransaction(TryAbort) returns, whatever it returned: with a failed
// producer id kgo's TryAbort may return nil without sending anything, only marking the id for
// reload at the next produce, and after the run's last transaction there is no next produce, so
// the broker would keep the transaction open (and read_committed stuck behind it) until its
// timeout. Only clean transactions (every record acknowledged, the end answered) skip it.

// TxnOutcome is how a transaction ended.
type TxnOutcome uint8

const (
	TxnCommitted TxnOutcome = iota + 1
	TxnAborted
	TxnInDoubt
)

func (o TxnOutcome) String() string {
	switch o {
	case TxnCommitted:
		return "committed"
	case TxnAborted:
		return "aborted"
	case TxnInDoubt:
		return "in doubt"
	}
	return fmt.Sprintf("TxnOutcome(%d)", uint8(o))
}

// Txn is one transaction of a producer: its records are the sequence numbers [First, End).
type Txn struct {
	First, End uint64
	Outcome    TxnOutcome
	// Chosen: aborted because TxnAbortFraction chose it, not after an error.
	Chosen bool
}

// TxnLog is one producer's transactions in sequence order; consecutive transactions are
// adjacent (one's End is the next's First) and empty transactions are not logged.
type TxnLog []Txn

// find returns the transaction holding seq.
func (l TxnLog) find(seq uint64) (Txn, bool) {
	i := sort.Search(len(l), func(i int) bool { return l[i].End > seq })
	if i < len(l) && l[i].First <= seq {
		return l[i], true
	}
	return Txn{}, false
}

// chosenForAbort reports whether transaction k (0-based) of producer index is aborted by
// choice, for an abort fraction f in [0, 1]. It is a counter, not a random draw, so a run is
// reproducible and over any f^-1 consecutive transactions of a producer exactly the fraction is
// aborted: transaction k is aborted when floor((k+1+index)·f) > floor((k+index)·f). The index
// staggers the producers, so that they do not all abort the same transactions.
func chosenForAbort(index uint32, k uint64, f float64) bool {
	if f <= 0 {
		return false
	}
	if f >= 1 {
		return true
	}
	x := float64(k) + float64(index)
	return math.Floor((x+1)*f) > math.Floor(x*f)
}

// TxnSummary counts a run's transactions.
type TxnSummary struct {
	Committed uint64 `json:"committed"`
	// Aborted counts every aborted transaction; AbortedChosen those of them that
	// TxnAbortFraction chose, the rest were aborted after an error.
	Aborted       uint64 `json:"aborted"`
	AbortedChosen uint64 `json:"aborted_chosen"`
	// InDoubt: the commit was attempted and EndTransaction returned an error, so whether it
	// committed is unknown (see txn.go).
	InDoubt uint64 `json:"in_doubt"`

	CommittedRecords uint64 `json:"committed_records"`
	AbortedRecords   uint64 `json:"aborted_records"`
	InDoubtRecords   uint64 `json:"in_doubt_records"`

	// ClientsRecreated counts clients closed and replaced after a fatal transactional error.
	ClientsRecreated uint64 `json:"clients_recreated"`
	// Errors counts the errors of BeginTransaction, EndTransaction and client recreation, by
	// operation and error text.
	Errors map[string]uint64 `json:"errors,omitempty"`
}

func (s *TxnSummary) add(o *TxnSummary) {
	s.Committed += o.Committed
	s.Aborted += o.Aborted
	s.AbortedChosen += o.AbortedChosen
	s.InDoubt += o.InDoubt
	s.CommittedRecords += o.CommittedRecords
	s.AbortedRecords += o.AbortedRecords
	s.InDoubtRecords += o.InDoubtRecords
	s.ClientsRecreated += o.ClientsRecreated
	for k, n := range o.Errors {
		if s.Errors == nil {
			s.Errors = make(map[string]uint64)
		}
		s.Errors[k] += n
	}
}

// txnState is a transactional producer's state. Only the producer's lifecycle goroutine
// touches it.
type txnState struct {
	records       uint64  // per transaction
	abortFraction float64 // of transactions aborted by choice
	opts          []kgo.Opt

	open          bool
	first         uint64 // first sequence number of the open transaction
	ackedAtBegin  uint64 // p.acked when it began
	failedAtBegin uint64 // p.failed when it began
	begun         uint64 // transactions begun, the index of the next
	broken        bool   // recovery failed: the producer stops sending

	log     TxnLog
	summary TxnSummary
}

const (
	// txnControlTimeout bounds each BeginTransaction / EndTransaction / client recreation
	// episode of a producer, retries included. It outlasts a broker restart; a producer that
	// cannot end or begin a transaction for this long stops sending.
	txnControlTimeout = 2 * time.Minute
	// txnRetryBackoff separates retries of transaction control calls.
	txnRetryBackoff = 250 * time.Millisecond
	// txnInitTimeout bounds one InitProducerId of a recreated client.
	txnInitTimeout = 10 * time.Second
)

func (p *producer) txnError(op string, err error) {
	if p.txn.summary.Errors == nil {
		p.txn.summary.Errors = make(map[string]uint64)
	}
	p.txn.summary.Errors[op+": "+err.Error()]++
}

// txnBegin begins a transaction at sequence number seq. false means the producer cannot begin
// one (recovery failed) and must stop sending.
func (p *producer) txnBegin(ctx context.Context, seq uint64) bool {
	t := p.txn
	if t.broken {
		return false
	}
	err := p.client.BeginTransaction()
	if err != nil {
		// A fatal producer id, or a client still in a transaction whose abort did not go
		// through: start over with a new client.
		p.txnError("begin", err)
		ctlCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnControlTimeout)
		defer cancel()
		for err != nil {
			if !p.recreateClient(ctlCtx) {
				t.broken = true
				return false
			}
			if err = p.client.BeginTransaction(); err != nil {
				p.txnError("begin", err)
			}
		}
	}
	t.open = true
	t.first = seq
	t.ackedAtBegin = p.acked.Load()
	t.failedAtBegin = p.failed.Load()
	return true
}

// txnDue reports whether the open transaction must end after sequence number seq was
// produced: it holds TxnRecords records, or one of its records already failed (it will be
// aborted, so sending more into it is wasted).
func (p *producer) txnDue(seq uint64) bool {
	t := p.txn
	return seq+1-t.first >= t.records || p.failed.Load() != t.failedAtBegin
}

// txnEnd ends the open transaction, whose records are [t.first, end): Flush (bounded by ctx,
// the run's abort), then commit or abort as txn.go describes, and log the outcome.
func (p *producer) txnEnd(ctx context.Context, end uint64) {
	t := p.txn
	if !t.open {
		return
	}
	t.open = false
	k := t.begun
	t.begun++
	n := end - t.first
	flushErr := p.client.Flush(ctx)
	// Every record of the transaction that was buffered has had its promise by now (kgo calls
	// a promise before it counts the record unbuffered, and Flush waits for none buffered),
	// and acks of earlier transactions all came before their own Flush returned: the
	// difference is exactly this transaction's acks.
	acked := p.acked.Load() - t.ackedAtBegin
	chosen := chosenForAbort(p.index, k, t.abortFraction)

	ctlCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnControlTimeout)
	defer cancel()
	outcome := TxnAborted
	switch planEnd(n, acked, flushErr == nil, chosen) {
	case endEmpty:
		// Nothing was produced: kgo ends it without a request. Not logged.
		if err := p.client.EndTransaction(ctlCtx, kgo.TryAbort); err != nil {
			p.txnError("end empty", err)
			p.recover(ctlCtx)
		}
		return
	case endFence:
		// The run is being aborted (flush timeout) with records still buffered: fence the
		// producer with a new client rather than ending a transaction kgo still sends to.
		p.txnError("flush", flushErr)
		p.recreateClient(ctlCtx)
	case endCommit:
		err := p.client.EndTransaction(ctlCtx, kgo.TryCommit)
		outcome = commitOutcome(err)
		if err != nil {
			p.txnError("commit", err)
			p.abort(ctlCtx, true) // kgo's retry after a failed commit
		}
	case endAbort:
		p.abort(ctlCtx, acked != n)
	}
	p.logTxn(Txn{First: t.first, End: end, Outcome: outcome, Chosen: chosen && outcome == TxnAborted})
}

// endAction is how txnEnd ends a transaction.
type endAction uint8

const (
	endEmpty  endAction = iota // no records: end it without logging
	endFence                   // Flush did not finish: replace the client (aborted)
	endCommit                  // EndTransaction(TryCommit): outcome per commitOutcome
	endAbort                   // EndTransaction(TryAbort) (aborted)
)

// planEnd decides how to end a transaction of n records, acked of which were acknowledged
// once Flush returned (flushed: without error); chosen: the abort fraction chose it. Only a
// transaction whose every record was acknowledged is committed.
func planEnd(n, acked uint64, flushed, chosen bool) endAction {
	switch {
	case n == 0:
		return endEmpty
	case !flushed:
		return endFence
	case chosen || acked != n:
		return endAbort
	}
	return endCommit
}

// commitOutcome is the outcome of a transaction whose EndTransaction(TryCommit) returned err:
// committed on nil; aborted on kerr.OperationNotAttempted, which kgo returns without sending
// the EndTxn (the producer id had failed); in doubt on any other error, since the EndTxn may
// have been sent and applied (see txn.go).
func commitOutcome(err error) TxnOutcome {
	switch {
	case err == nil:
		return TxnCommitted
	case errors.Is(err, kerr.OperationNotAttempted):
		return TxnAborted
	}
	return TxnInDoubt
}

func (p *producer) logTxn(x Txn) {
	t := p.txn
	t.log = append(t.log, x)
	n := x.End - x.First
	switch x.Outcome {
	case TxnCommitted:
		t.summary.Committed++
		t.summary.CommittedRecords += n
	case TxnAborted:
		t.summary.Aborted++
		t.summary.AbortedRecords += n
		if x.Chosen {
			t.summary.AbortedChosen++
		}
	case TxnInDoubt:
		t.summary.InDoubt++
		t.summary.InDoubtRecords += n
	}
}

// abort ends the client's transaction with EndTransaction(TryAbort), which is also kgo's retry
// after a failed commit, then fences it with a new client if the abort failed or fence is set
// (the transaction already saw an error).
func (p *producer) abort(ctx context.Context, fence bool) {
	if err := p.client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		p.txnError("abort", err)
		fence = true
	}
	if fence {
		p.recover(ctx)
	}
}

// recover replaces the client after an end that could not be completed; if that fails too,
// the producer is broken and sends no more.
func (p *producer) recover(ctx context.Context) {
	if !p.recreateClient(ctx) {
		p.txn.broken = true
	}
}

// recreateClient closes the client and creates a new one with the same transactional id,
// retrying until its InitProducerId succeeds or ctx ends; false if it never did (the old
// client stays then, to be closed by finish). The new producer id fences the old client: the
// broker aborts whatever transaction it had open, or completes one it had decided to commit.
func (p *producer) recreateClient(ctx context.Context) bool {
	for ctx.Err() == nil {
		cl, err := kgo.NewClient(p.txn.opts...)
		if err != nil {
			p.txnError("new client", err)
			return false // a configuration error: retrying cannot help
		}
		initCtx, cancel := context.WithTimeout(ctx, txnInitTimeout)
		_, _, err = cl.ProducerID(initCtx)
		cancel()
		if err == nil {
			p.client.Close()
			p.client = cl
			p.txn.summary.ClientsRecreated++
			return true
		}
		cl.Close()
		p.txnError("init producer id", err)
		sleepCtx(ctx, txnRetryBackoff)
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
