package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/diskless"
	"inlet/meta"
	"inlet/objstore"
	"inlet/server"
	"inlet/txn"
)

// withBucketTxns wires the transaction coordinator's store as cmd/inlet does on a node with
// the diskless commit log: every transactional id's record goes to the bucket before it is
// answered.
func withBucketTxns(cfg *server.Config) {
	c := cfg.Diskless.(*diskless.Committer)
	cfg.TxnStore = func(m *meta.Store) txn.Store { return c.TxnStore(m) }
}

// describeTxn returns the transactional id as DescribeTransactions shows it.
func describeTxn(ctx context.Context, t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("describe transactions: %v", err)
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %v %v", id, ok, d.Err)
	}
	return d
}

// TestDisklessTransactionsComeBackFromTheBucket: a franz-go transactional producer on a
// diskless topic commits one transaction, aborts another and leaves a third open (its
// batches acknowledged); the node is closed and its data directory deleted; on a node
// restored from the bucket a read_committed consumer reads exactly the committed
// transaction's records, the open one is aborted (its records visible only to
// read_uncommitted), and the producer, initialised again, goes on at a higher epoch. EndTxn
// is answered only after its records and markers are PUT.
func TestDisklessTransactionsComeBackFromTheBucket(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false, withBucketGroups, withBucketTxns)
	addr := n.addr
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(tierClient(t, &broker{addr: addr}))
	const (
		topic = "dtx"
		parts = 2
		id    = "inlet-e2e-diskless-txn"
	)
	if r, err := adm.CreateTopic(ctx, parts, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, topic); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	producer := func() *kgo.Client {
		return tierClient(t, &broker{addr: addr}, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionTimeout(time.Minute))
	}
	records := func(tag string, n int) []*kgo.Record {
		out := make([]*kgo.Record, n)
		for i := range out {
			k := fmt.Sprintf("%s-%d", tag, i)
			out[i] = &kgo.Record{Topic: topic, Partition: int32(i % parts), Key: []byte(k), Value: []byte("v-" + k)}
		}
		return out
	}
	transact := func(cl *kgo.Client, tag string, end kgo.TransactionEndTry) []*kgo.Record {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs := records(tag, 6)
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", tag, err)
		}
		if end == kgo.TryCommit || end == kgo.TryAbort {
			if err := cl.EndTransaction(ctx, end); err != nil {
				t.Fatalf("%s: end: %v", tag, err)
			}
		}
		return rs
	}

	p1 := producer()
	committed := transact(p1, "c1", kgo.TryCommit)
	transact(p1, "a2", kgo.TryAbort)
	// The third: records acknowledged (so in the bucket), no end.
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	open := records("o3", 6)
	if err := p1.ProduceSync(ctx, open...).FirstErr(); err != nil {
		t.Fatalf("o3: produce: %v", err)
	}
	before := describeTxn(ctx, t, adm, id)
	if before.State != "Ongoing" {
		t.Fatalf("before the loss: %+v", before)
	}
	want := map[string]txnSeen{}
	for _, r := range committed {
		want[string(r.Key)] = txnSeen{partition: r.Partition, offset: r.Offset, value: string(r.Value)}
	}
	txnCheckExactly(t, "read_committed before the loss", txnDrainKgo(ctx, t, addr, topic, parts, kgo.ReadCommitted()), want)

	// The node and its disk are lost; a node is restored from the bucket alone.
	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), addr, true, withBucketGroups, withBucketTxns)

	// The open transaction is aborted at start, at a bumped epoch (its producer fenced).
	deadline := time.Now().Add(20 * time.Second)
	var after kadm.DescribedTransaction
	for {
		after = describeTxn(ctx, t, adm, id)
		if after.State == "CompleteAbort" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the open transaction was not aborted after the restore: %+v", after)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after.ProducerID != before.ProducerID || after.ProducerEpoch <= before.ProducerEpoch {
		t.Fatalf("after the restore: producer %d epoch %d, before %d epoch %d", after.ProducerID, after.ProducerEpoch, before.ProducerID, before.ProducerEpoch)
	}
	ectx, ecancel := context.WithTimeout(ctx, 15*time.Second)
	err := p1.EndTransaction(ectx, kgo.TryCommit)
	ecancel()
	if err == nil {
		t.Fatal("the open transaction committed after the restore aborted it")
	} else if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Logf("the old producer's commit after the restore: %v", err)
	}

	txnCheckExactly(t, "read_committed after the restore", txnDrainKgo(ctx, t, r.addr, topic, parts, kgo.ReadCommitted()), want)
	// read_uncommitted reads every transaction's records, once: all were in the bucket.
	all := map[string]txnSeen{}
	for _, tag := range []string{"c1", "a2", "o3"} {
		for _, rec := range records(tag, 6) {
			all[string(rec.Key)] = txnSeen{partition: rec.Partition, offset: -1, value: string(rec.Value)}
		}
	}
	txnCheckExactly(t, "read_uncommitted after the restore", txnDrainKgo(ctx, t, r.addr, topic, parts, kgo.ReadUncommitted()), all)

	// The producer, initialised again, carries on at a higher epoch; its commit is answered
	// only after its PUTs (the prepare, the markers, the completion: each a commit window).
	p2 := producer()
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	more := records("c4", 6)
	if err := p2.ProduceSync(ctx, more...).FirstErr(); err != nil {
		t.Fatalf("c4: produce: %v", err)
	}
	bucket.SetDelay(150 * time.Millisecond)
	began := time.Now()
	err = p2.EndTransaction(ctx, kgo.TryCommit)
	took := time.Since(began)
	bucket.SetDelay(0)
	if err != nil {
		t.Fatalf("c4: commit: %v", err)
	}
	if took < 450*time.Millisecond {
		t.Fatalf("EndTxn answered after %v: before its prepare, markers and completion (150 ms each) could land", took)
	}
	if d := describeTxn(ctx, t, adm, id); d.State != "CompleteCommit" || d.ProducerEpoch <= after.ProducerEpoch {
		t.Fatalf("after the new producer's commit: %+v (the abort's epoch %d)", d, after.ProducerEpoch)
	}
	for _, rec := range more {
		want[string(rec.Key)] = txnSeen{partition: rec.Partition, offset: rec.Offset, value: string(rec.Value)}
	}
	txnCheckExactly(t, "read_committed after the new producer's commit", txnDrainKgo(ctx, t, r.addr, topic, parts, kgo.ReadCommitted()), want)
}

// TestDisklessConsumeTransformProduceAcrossARestore: a franz-go GroupTransactSession reads a
// diskless topic and writes each record, transformed, to another in transactions that commit
// the group's offsets with the output; with one transaction open (output acknowledged,
// offsets not committed) the node is closed and its data directory deleted; a session on the
// node restored from the bucket goes on from the committed offsets. read_committed reads every
// input's output exactly once.
func TestDisklessConsumeTransformProduceAcrossARestore(t *testing.T) {
	bucket := objstore.NewMemory()
	dir := t.TempDir()
	n := startDisklessNode(t, bucket, dir, "127.0.0.1:0", false, withBucketGroups, withBucketTxns)
	addr := n.addr
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(tierClient(t, &broker{addr: addr}))
	for _, topic := range []string{"ctp-in", "ctp-out"} {
		if r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	const inputs = 40
	pc := tierClient(t, &broker{addr: addr}, kgo.DefaultProduceTopic("ctp-in"))
	for i := range inputs {
		if err := pc.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce input: %v", err)
		}
	}
	session := func() *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("ctp"),
			kgo.ConsumerGroup("ctp-g"), kgo.ConsumeTopics("ctp-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("ctp-out"),
			kgo.TransactionTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	done := map[string]bool{} // inputs whose output committed
	// step runs one transaction over at most max inputs; end false leaves it open.
	step := func(s *kgo.GroupTransactSession, max int, end bool) []string {
		t.Helper()
		if err := s.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := s.PollRecords(pctx, max)
		pcancel()
		var in []string
		fs.EachRecord(func(r *kgo.Record) {
			in = append(in, string(r.Value))
			if err := s.ProduceSync(ctx, &kgo.Record{Key: r.Value, Value: []byte("out-" + string(r.Value))}).FirstErr(); err != nil {
				t.Fatalf("produce output: %v", err)
			}
		})
		if !end {
			return in
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		if committed {
			for _, v := range in {
				done[v] = true
			}
		}
		return in
	}

	s1 := session()
	for len(done) < inputs/2 {
		if ctx.Err() != nil {
			t.Fatalf("%d inputs committed before the loss", len(done))
		}
		step(s1, 5, true)
	}
	var open []string
	for len(open) == 0 && ctx.Err() == nil {
		open = step(s1, 5, false)
	}

	n.stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r := startDisklessNode(t, bucket, t.TempDir(), addr, true, withBucketGroups, withBucketTxns)
	s1.Close()
	for _, v := range open {
		if done[v] {
			t.Fatalf("input %s of the open transaction was committed before the loss", v)
		}
	}

	s2 := session()
	defer s2.Close()
	for len(done) < inputs {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d inputs committed after the restore", len(done), inputs)
		}
		step(s2, 10, true)
	}

	seen := txnDrainKgo(ctx, t, r.addr, "ctp-out", 2, kgo.ReadCommitted())
	for i := range inputs {
		k := strconv.Itoa(i)
		if got := seen[k]; len(got) != 1 || got[0].value != "out-"+k {
			t.Errorf("input %s: read_committed output %+v, want out-%s once", k, got, k)
		}
	}
	if len(seen) != inputs {
		t.Errorf("read_committed reads %d outputs, want %d", len(seen), inputs)
	}
	// The open transaction's output was in the bucket, and aborted: read_uncommitted reads
	// it beside the output written again after the restore.
	all := txnDrainKgo(ctx, t, r.addr, "ctp-out", 2, kgo.ReadUncommitted())
	for _, v := range open {
		if len(all[v]) < 2 {
			t.Errorf("input %s of the open transaction: read_uncommitted output %+v, want its aborted copy too", v, all[v])
		}
	}
}
