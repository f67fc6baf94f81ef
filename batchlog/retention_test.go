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

// TestCommittedOffsetsSurviveRestart guards the offset store.
func TestCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	k := OffsetKey{Topic: "t", Partition: 3}
	if err := l.CommitOffsets("g", map[OffsetKey]CommittedOffset{k: {Offset: 42, LeaderEpoch: 0, Metadata: "m", CommitTime: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := l.CommitOffsets("g2", map[OffsetKey]CommittedOffset{k: {Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := l.SaveGroup("g", GroupRecord{ProtocolType: "consumer", Generation: 5}); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteGroup("g2"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openTemp(t, dir)
	defer l.Close()
	gs, err := l.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	g := gs["g"]
	if g == nil || g.Offsets[k].Offset != 42 || g.Offsets[k].Metadata != "m" || g.Record.Generation != 5 {
		t.Fatalf("loaded %+v", g)
	}
	if _, ok := gs["g2"]; ok {
		t.Fatal("deleted group came back")
	}
}
