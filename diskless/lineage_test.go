package diskless

import (
	"context"
	"errors"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/objstore"
	"inlet/wire"
)

// TestDivergedDiskRefusesToStart: node A writes a batch locally that never reaches the bucket
// (unacknowledged), and stops; node B, restored from the bucket, gives the same offsets to
// another producer's batch and acknowledges it. A started again on its own disk must not take
// its unacknowledged tail for B's batch: its start stops with ErrDiverged, and A restored on an
// empty directory serves B's batch.
func TestDivergedDiskRefusesToStart(t *testing.T) {
	m := objstore.NewMemory()
	dirA := t.TempDir()
	a := openNode(t, dirA, m, Config{RequestTimeout: 100 * time.Millisecond, CloseTimeout: 100 * time.Millisecond}, false)
	d := a.topic("d", true)
	if r := a.send(appendOf(d.Partitions[0], 3, 0, 2, 1)).wait(t, 5*time.Second); r.Err != 0 {
		t.Fatal(r.Err)
	}
	m.SetDown(errDown)
	if r := a.send(appendOf(d.Partitions[0], 3, 2, 2, 2)).wait(t, 5*time.Second); r.Err != wire.ErrRequestTimedOut {
		t.Fatalf("err %d", r.Err)
	}
	a.close()
	m.SetDown(nil)

	b := openNode(t, t.TempDir(), m, Config{}, true)
	if r := b.send(appendOf(b.l.Topics()[0].Partitions[0], 4, 0, 2, 3)).wait(t, 5*time.Second); r.Err != 0 || r.BaseOffset != 2 {
		t.Fatalf("B's produce: err %d at %d", r.Err, r.BaseOffset)
	}
	b.close()

	c := New(Config{Bucket: m, Logger: quiet})
	l, err := batchlog.Open(batchlog.Options{Dir: dirA, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Diskless: c, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Recover(ctx, l); !errors.Is(err, ErrDiverged) {
		t.Fatalf("A's start on its own disk after B wrote: %v, want ErrDiverged", err)
	}
	_ = l.Close()
	c.Close()

	r := openNode(t, t.TempDir(), m, Config{}, true)
	defer r.close()
	got, err := r.l.ReadBatches(r.l.Topics()[0].Partitions[0], 2, 4, 1<<20, true, nil)
	if err != nil || len(got) == 0 || tagOf(got) != 3 {
		t.Fatalf("restored: %v, batch at 2 of tag %v, want B's (3)", err, got)
	}
}
