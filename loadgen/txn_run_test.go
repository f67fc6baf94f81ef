package loadgen

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTransactionalRunAgainstKfake runs the whole transactional path in process against
// franz-go's kfake: 2 producers of 1,000 records in transactions of 100, a fraction aborted,
// read back with read_committed. Nothing fails, so the outcomes are exactly the ones the abort
// counter chose, and the verifier must find every committed record once and no aborted one.
func TestTransactionalRunAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const fraction = 0.3
	res, err := Run(ctx, Config{
		Brokers: c.ListenAddrs(), Topic: "txn", Partitions: 3, Producers: 2, Idempotent: true, RecordSize: 40,
		Records: 2000, Transactional: true, TxnRecords: 100, TxnAbortFraction: fraction, Verify: true,
		FlushTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", b.String())

	var chosen uint64
	for p := range uint32(2) {
		for k := range uint64(10) {
			if chosenForAbort(p, k, fraction) {
				chosen++
			}
		}
	}
	want := TxnSummary{Committed: 20 - chosen, CommittedRecords: (20 - chosen) * 100, Aborted: chosen, AbortedChosen: chosen,
		AbortedRecords: chosen * 100}
	if got := *res.Transactions; got.Errors != nil || got.Committed != want.Committed || got.Aborted != want.Aborted ||
		got.AbortedChosen != want.AbortedChosen || got.InDoubt != 0 || got.CommittedRecords != want.CommittedRecords ||
		got.AbortedRecords != want.AbortedRecords || got.ClientsRecreated != 0 {
		t.Fatalf("transactions %+v, want %+v", got, want)
	}
	if res.Sent != 2000 || res.Acked != 2000 || res.Failed != 0 {
		t.Fatalf("sent %d acked %d failed %d", res.Sent, res.Acked, res.Failed)
	}
	v := res.Verify
	if v == nil || !v.OK || v.Mode != ModeTransactional || v.Found != want.CommittedRecords || v.Read != want.CommittedRecords ||
		v.Txn.AbortedVisible != 0 || v.Txn.Committed != want.Committed || v.Txn.Aborted != chosen {
		t.Fatalf("verify %+v %+v", v, v.Txn)
	}
	if id := res.Producers[1].TransactionalID; !strings.HasPrefix(id, "loadgen-") || !strings.HasSuffix(id, "-1") {
		t.Errorf("transactional id %q", id)
	}
}
