package loadgen

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceError answers a produce request with err on every partition.
func produceError(req *kmsg.ProduceRequest, err *kerr.Error) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = err.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TestTransactionalRunSurvivesErrors injects the errors a killed broker causes, against kfake:
// a produce request refused with a non-retriable error (its records fail, so their
// transaction must be aborted, and kgo's producer id is failed) and a commit answered with
// UNKNOWN_SERVER_ERROR (kgo returns it, so the transaction is in doubt; it was in fact not
// committed, and the abort that follows aborts it). The run must still verify: nothing of the
// aborted transactions visible, the in-doubt one read whole or not at all.
func TestTransactionalRunSurvivesErrors(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var produces, commits, aborts atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if produces.Add(1) == 5 {
			return produceError(r.(*kmsg.ProduceRequest), kerr.InvalidTxnState), nil, true
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.EndTxnRequest)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		switch {
		case req.Commit && commits.Add(1) == 4:
			resp.ErrorCode = kerr.UnknownServerError.Code
		case !req.Commit && aborts.Add(1) == 2:
			resp.ErrorCode = kerr.ProducerFenced.Code
		default:
			return nil, nil, false
		}
		return resp, nil, true
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{
		Brokers: c.ListenAddrs(), Topic: "txn", Partitions: 2, Producers: 2, Idempotent: true, RecordSize: 40,
		Records: 4000, Rate: 20_000, Transactional: true, TxnRecords: 200, TxnAbortFraction: 0.25, Verify: true, FlushTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", b.String())

	tx := res.Transactions
	if res.Sent != 4000 || res.Acked+res.Failed != 4000 || res.Failed == 0 || res.Unresolved != 0 {
		t.Fatalf("sent %d acked %d failed %d unresolved %d", res.Sent, res.Acked, res.Failed, res.Unresolved)
	}
	if tx.CommittedRecords+tx.AbortedRecords+tx.InDoubtRecords != res.Sent {
		t.Fatalf("transactions hold %d records of %d sent", tx.CommittedRecords+tx.AbortedRecords+tx.InDoubtRecords, res.Sent)
	}
	// The transaction with the failed records is aborted (after the error, or by choice when
	// the counter chose it anyway), one is in doubt; the transactions that saw errors (those
	// two, and the one whose abort was refused, if another) were fenced.
	if tx.Aborted-tx.AbortedChosen > 1 || tx.Aborted == 0 || tx.InDoubt != 1 || tx.Committed == 0 ||
		tx.ClientsRecreated < 2 || tx.ClientsRecreated > 3 {
		t.Fatalf("transactions %+v", *tx)
	}
	for _, want := range []string{"commit: UNKNOWN_SERVER_ERROR", "abort: PRODUCER_FENCED"} {
		found := false
		for e := range tx.Errors {
			found = found || strings.HasPrefix(e, want)
		}
		if !found {
			t.Errorf("no %q in the transaction errors %v", want, tx.Errors)
		}
	}
	v := res.Verify
	// Every record of a committed transaction was acknowledged: the verifier's count (acked
	// records in committed transactions) is the producers' (records in them).
	if v == nil || !v.OK || v.Txn.AbortedVisible != 0 || v.Txn.InDoubtAborted != 1 || v.Found != tx.CommittedRecords ||
		v.Txn.CommittedRecords != tx.CommittedRecords {
		t.Fatalf("verify %+v %+v", v, v.Txn)
	}
}
