package diskless

import (
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/objstore"
)

// deleteRecords moves p's log start as the admin API does on a diskless topic: in the bucket
// first (KeepLogStart), then in the log.
func deleteRecords(t *testing.T, c *Committer, l *batchlog.Log, tp *batchlog.Topic, p *batchlog.Partition, offset int64) {
	t.Helper()
	if err := c.KeepLogStart(tp.ID, p.Index, offset); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecords(p, offset); err != nil {
		t.Fatal(err)
	}
}

// A DeleteRecords answered after the last checkpoint comes back from a restore: its log start
// was in the bucket before it was answered.
func TestRestoreKeepsTheLogStartOfADeleteRecords(t *testing.T) {
	bucket := objstore.NewMemory()
	n := openTiered(t, t.TempDir(), bucket, 0, false)
	tp, err := n.l.CreateTopicBy("d", 1, map[string]string{"diskless.enable": "true"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.c.Describe(t.Context(), tp); err != nil {
		t.Fatal(err)
	}
	p := tp.Partitions[0]
	for i := range 3 {
		n.put(appendOf(p, -1, 0, 1, byte('a'+i)))
	}
	n.upload()
	if n.checkpoint() == 0 {
		t.Fatal("no checkpoint")
	}
	for i := range 3 {
		n.put(appendOf(p, -1, 0, 1, byte('d'+i)))
	}
	deleteRecords(t, n.c, n.l, tp, p, 2) // below the checkpoint's objects' batches
	deleteRecords(t, n.c, n.l, tp, p, 4) // in the batches after them
	deleteRecords(t, n.c, n.l, tp, p, 3) // behind: no move (the log answers 4)
	n.close()

	r := openTiered(t, t.TempDir(), bucket, 0, true)
	defer r.close()
	rtp, _ := r.l.Topic("d")
	rp := rtp.Partitions[0]
	if rp.LogStartOffset() != 4 || rp.HighWatermark() != 6 {
		t.Fatalf("restored log start %d, high watermark %d; want 4, 6", rp.LogStartOffset(), rp.HighWatermark())
	}
	if got := r.readAll(rp); len(got) != 2 || got[4] != 'e' || got[5] != 'f' {
		t.Fatalf("restored %v, want offsets 4 and 5 only", got)
	}
}

// Without checkpoints the log start comes back from the commit log alone; one refused with the
// bucket down does not.
func TestRestoreKeepsTheLogStartWithoutCheckpoints(t *testing.T) {
	bucket := objstore.NewMemory()
	n := openNode(t, t.TempDir(), bucket, Config{RequestTimeout: 300 * time.Millisecond, CloseTimeout: 100 * time.Millisecond}, false)
	tp := n.topic("d", true)
	p := tp.Partitions[1]
	for i := range 4 {
		if r := n.send(appendOf(p, -1, 0, 1, byte('a'+i))).wait(t, 10*time.Second); r.Err != 0 {
			t.Fatalf("append: error %d", r.Err)
		}
	}
	deleteRecords(t, n.c, n.l, tp, p, 3)
	bucket.SetDown(errDown)
	if err := n.c.KeepLogStart(tp.ID, p.Index, 4); err == nil {
		t.Fatal("a log start put with the bucket down returned success")
	}
	n.c.Close() // before the bucket is back: the failed put never lands
	bucket.SetDown(nil)
	if err := n.l.Close(); err != nil {
		t.Fatal(err)
	}

	r := openNode(t, t.TempDir(), bucket, Config{}, true)
	defer r.close()
	rtp, _ := r.l.Topic("d")
	if rp := rtp.Partitions[1]; rp.LogStartOffset() != 3 || rp.HighWatermark() != 4 {
		t.Fatalf("restored log start %d, high watermark %d; want 3, 4", rp.LogStartOffset(), rp.HighWatermark())
	}
	if rp := rtp.Partitions[0]; rp.LogStartOffset() != 0 {
		t.Fatalf("the other partition's log start restored as %d", rp.LogStartOffset())
	}
}
