package batchlog

import "testing"

// TestDeleteRecordsKeepsTheBatchItFallsIn guards DeleteRecords inside a batch: the log start
// moves to the offset, the batch holding it stays readable whole.
func TestDeleteRecordsKeepsTheBatchItFallsIn(t *testing.T) {
	l := openTemp(t, t.TempDir())
	tp, _ := l.CreateTopic("dr", 1, nil)
	p := tp.Partitions[0]
	submitWait(t, l, plain(p, 3, 1))
	submitWait(t, l, plain(p, 3, 2))
	if _, err := l.DeleteRecords(p, 7); err != ErrOffsetOutOfRange {
		t.Fatalf("past the end: %v", err)
	}
	if got, err := l.DeleteRecords(p, 4); err != nil || got != 4 {
		t.Fatalf("delete to 4: %d %v", got, err)
	}
	b, _ := l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil)
	if len(b) != 62 || b[61] != 2 {
		t.Fatalf("after DeleteRecords(4) read %d bytes; want only the batch holding offsets 3-5", len(b))
	}
}

// TestDeleteTopicFreesNameAndRestarts guards deletion: the name is reusable at once, the new
// topic starts empty, and a restart (replaying segment entries of the deleted partitions)
// works.
func TestDeleteTopicFreesNameAndRestarts(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	tp, _ := l.CreateTopic("gone", 2, nil)
	submitWait(t, l, plain(tp.Partitions[0], 5, 1))
	if err := l.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteTopic("gone"); err != ErrUnknownTopic {
		t.Fatalf("second delete: %v", err)
	}
	tp2, err := l.CreateTopic("gone", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tp2.Partitions[0].HighWatermark() != 0 {
		t.Fatal("recreated topic is not empty")
	}
	l.Close()
	l = openTemp(t, dir)
	defer l.Close()
	tp3, ok := l.Topic("gone")
	if !ok || len(tp3.Partitions) != 1 || tp3.Partitions[0].HighWatermark() != 0 {
		t.Fatalf("after restart: %v %+v", ok, tp3)
	}
}
