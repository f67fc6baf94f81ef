package diskless

import (
	"bytes"
	"context"
	"testing"
	"time"

	"inlet/objstore"
	"inlet/txn"
	"inlet/wire"
)

func TestTxnOpRoundTrip(t *testing.T) {
	for _, b := range [][]byte{
		encodeTxnOp(opTxnSave, "id", []byte(`{"pid":1}`)),
		encodeTxnOp(opTxnSave, "", nil),
		encodeTxnOp(opTxnDelete, "gone", nil),
	} {
		op, id, v, err := decodeTxnOp(b)
		if err != nil || !bytes.Equal(encodeTxnOp(op, id, v), b) {
			t.Fatalf("%q: %d %q %q %v", b, op, id, v, err)
		}
		for i := range min(len(b), 3) {
			if _, _, _, err := decodeTxnOp(b[:i]); err == nil {
				t.Fatalf("%q cut at %d decoded", b, i)
			}
		}
	}
	if _, _, _, err := decodeTxnOp(encodeTxnOp(opTxnDelete, "x", []byte{1})); err == nil {
		t.Fatal("a removal with a record decoded")
	}
	if _, _, _, err := decodeTxnOp(encodeTxnOp(3, "x", nil)); err == nil {
		t.Fatal("an unknown op decoded")
	}
}

// FuzzTxnOp: decodeTxnOp never panics; what it accepts re-encodes to the same bytes.
func FuzzTxnOp(f *testing.F) {
	f.Add(encodeTxnOp(opTxnSave, "id", []byte(`{"pid":1}`)))
	f.Add(encodeTxnOp(opTxnDelete, "id", nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		op, id, v, err := decodeTxnOp(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeTxnOp(op, id, v), b) {
			t.Fatal("accepted bytes do not re-encode the same")
		}
	})
}

// coordinatorOn is a transaction coordinator on n's catalog through TxnStore, loaded; its
// markers are counted, not written (the e2e tests write them through the log).
func coordinatorOn(t *testing.T, n *node, markers *[]txn.Marker) *txn.Coordinator {
	t.Helper()
	c, err := txn.New(txn.Config{Store: n.c.TxnStore(n.l.Meta()), Logger: quiet,
		WriteMarkers: func(_ context.Context, _ int64, _ int16, kind txn.Marker, _ []txn.TopicPartition) error {
			*markers = append(*markers, kind)
			return nil
		},
		CommitOffsets: func(string, []txn.PendingOffset) error { return nil },
	})
	if err == nil {
		err = c.Load()
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTxnRecordsComeBackFromTheBucket: every transactional id's record is PUT before the
// coordinator answers (and not taken with the bucket down); a node restored on an empty disk
// holds each id as last answered, with the transaction open at the loss made PrepareAbort at
// a bumped epoch, which the coordinator aborts at start; a restart on the node's own disk
// keeps an open transaction open.
func TestTxnRecordsComeBackFromTheBucket(t *testing.T) {
	m := objstore.NewMemory()
	dir := t.TempDir()
	n := openNode(t, dir, m, Config{CommitInterval: 50 * time.Millisecond, RequestTimeout: 300 * time.Millisecond}, false)
	n.topic("d", true)
	var markers []txn.Marker
	c := coordinatorOn(t, n, &markers)
	tp := []txn.TopicPartition{{Topic: "d", Partition: 0}}

	m.SetDelay(80 * time.Millisecond)
	began := time.Now()
	pidA, epochA, code := c.InitProducerID("a", 60000, -1, -1)
	if code != 0 {
		t.Fatal(code)
	}
	if took := time.Since(began); took < 80*time.Millisecond {
		t.Fatalf("InitProducerId answered after %v, before its PUT (80 ms) could land", took)
	}
	m.SetDelay(0)
	if code := c.AddPartitions("a", pidA, epochA, tp); code != 0 {
		t.Fatal(code)
	}
	if code := c.EndTxn("a", pidA, epochA, true); code != 0 {
		t.Fatal(code)
	}
	pidB, epochB, _ := c.InitProducerID("b", 60000, -1, -1)
	if code := c.AddPartitions("b", pidB, epochB, tp); code != 0 {
		t.Fatal(code)
	}
	// With the bucket down a change is refused, and the catalog does not take it.
	m.SetDown(errDown)
	if code := c.AddPartitions("b", pidB, epochB, []txn.TopicPartition{{Topic: "d", Partition: 1}}); code != wire.ErrCoordinatorNotAvailable {
		t.Fatalf("a change with the bucket down: %d", code)
	}
	m.SetDown(nil)
	if d, _ := c.Describe("b"); d.State != txn.Ongoing || len(d.Partitions) != 1 {
		t.Fatalf("b after a refused change: %+v", d)
	}
	c.Close()
	n.close()

	// The node's own disk: b stays open, with the change refused (which stayed queued and
	// landed once the bucket was back, as a produce answered an error may).
	n = openNode(t, dir, m, Config{CommitInterval: 50 * time.Millisecond}, false)
	c = coordinatorOn(t, n, &markers)
	if d, _ := c.Describe("b"); d.State != txn.Ongoing || d.Epoch != epochB || len(d.Partitions) != 2 {
		t.Fatalf("b after a restart: %+v", d)
	}
	c.Close()
	n.close()

	// An empty disk: a is as committed, b is aborted at a bumped epoch.
	n = openNode(t, t.TempDir(), m, Config{CommitInterval: 50 * time.Millisecond}, true)
	defer n.close()
	markers = nil
	c = coordinatorOn(t, n, &markers)
	if d, _ := c.Describe("a"); d.State != txn.CompleteCommit || d.ProducerID != pidA || d.Epoch != epochA {
		t.Fatalf("a after the restore: %+v", d)
	}
	if d, _ := c.Describe("b"); d.State != txn.PrepareAbort || d.Epoch != epochB+1 || len(d.Partitions) != 2 {
		t.Fatalf("b after the restore, loaded: %+v", d)
	}
	c.Start()
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d, _ := c.Describe("b"); d.State == txn.CompleteAbort {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the open transaction was not aborted after the restore")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(markers) != 1 || markers[0] != txn.AbortMarker {
		t.Fatalf("markers after the restore: %v", markers)
	}
	// No producer id of a record is handed out again.
	if pid, _, _ := c.InitProducerID("c", 60000, -1, -1); pid <= max(pidA, pidB) {
		t.Fatalf("a new id got producer id %d, the restored ones hold %d and %d", pid, pidA, pidB)
	}
}
