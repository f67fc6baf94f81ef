package segments

import (
	"errors"
	"path"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/segfs"
)

// openMemStore opens a store on a MemFS whose segment writes go through inject.
func openMemStore(t *testing.T, fs *segfs.MemFS) *Store {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(fs, "/data", db, true, Config{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); db.Close() })
	return s
}

// applied is a group of one batch at base, applied (staged for the flusher).
func applied(t *testing.T, s *Store, base int64) *Group {
	t.Helper()
	g := s.NewGroup(0)
	g.SetData(1, base, testBatch(base, 'x'), false)
	if err := g.Apply(); err != nil {
		t.Fatal(err)
	}
	return g
}

// segmentWrites counts the writes to segment files and can hold them: a write waits while
// hold is set, after telling entered.
type segmentWrites struct {
	n       atomic.Int32
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
	fail    atomic.Pointer[error]
}

func (w *segmentWrites) inject(op segfs.Op, name string) error {
	if op != segfs.OpWrite || path.Ext(name) != ".seg" {
		return nil
	}
	w.n.Add(1)
	if w.hold.Load() {
		w.entered <- struct{}{}
		<-w.release
	}
	if err := w.fail.Load(); err != nil {
		return *err
	}
	return nil
}

func newSegmentWrites(fs *segfs.MemFS) *segmentWrites {
	w := &segmentWrites{entered: make(chan struct{}), release: make(chan struct{})}
	fs.Inject(w.inject)
	return w
}

// TestReleaseWaitsForTheFlusher: a group the flusher has taken is released only once the
// flusher is done with it (its buffer is not recycled under a write in progress), and a
// group DropUnwritten took off the staged list is released at once and never written.
func TestReleaseWaitsForTheFlusher(t *testing.T) {
	fs := segfs.NewCrashableMem()
	w := newSegmentWrites(fs)
	s := openMemStore(t, fs)
	w.hold.Store(true)
	a := applied(t, s, 0)
	<-w.entered // the flusher is writing a
	w.hold.Store(false)
	b := applied(t, s, 1)
	s.DropUnwritten() // b: staged, not taken
	if err := b.Wait(); !errors.Is(err, errDropped) {
		t.Fatalf("wait for a dropped group: %v, want errDropped", err)
	}
	b.Release()

	released := make(chan struct{})
	go func() { a.Release(); close(released) }()
	select {
	case <-released:
		t.Fatal("a group was released while the flusher was writing it")
	case <-time.After(50 * time.Millisecond):
	}
	close(w.release)
	<-released
	if n := w.n.Load(); n != 1 {
		t.Fatalf("%d segment writes, want 1 (the dropped group is never written)", n)
	}
}

// TestFlusherWritesNothingAfterAFailedWrite: after a write fails, every group the flusher
// takes is answered with that error unwritten (a later group must not land past a hole),
// until ResetAfterFailure; then writes go on.
func TestFlusherWritesNothingAfterAFailedWrite(t *testing.T) {
	fs := segfs.NewCrashableMem()
	w := newSegmentWrites(fs)
	s := openMemStore(t, fs)
	full := error(syscall.ENOSPC)
	w.fail.Store(&full)
	a := applied(t, s, 0)
	if err := a.Wait(); !IsNoSpace(err) {
		t.Fatalf("wait after a full disk: %v, want a no-space error", err)
	}
	a.Release()
	w.fail.Store(nil)
	b := applied(t, s, 0)
	if err := b.Wait(); !IsNoSpace(err) {
		t.Fatalf("wait for a group after the failed write: %v, want the same error", err)
	}
	b.Release()
	if n := w.n.Load(); n != 1 {
		t.Fatalf("%d segment writes, want only the one that failed", n)
	}
	if err := s.ResetAfterFailure(); err != nil {
		t.Fatal(err)
	}
	c := applied(t, s, 0)
	if err := c.Wait(); err != nil {
		t.Fatalf("wait after the reset: %v", err)
	}
	c.Release()
	if n := w.n.Load(); n != 2 {
		t.Fatalf("%d segment writes after the reset, want 2", n)
	}
}

// TestFlushWritesStagedGroupsTogether: groups staged while a flush is in progress are taken
// together by the next one: one write and one sync for all of them, each answered in order.
func TestFlushWritesStagedGroupsTogether(t *testing.T) {
	fs := segfs.NewCrashableMem()
	w := newSegmentWrites(fs)
	s := openMemStore(t, fs)
	w.hold.Store(true)
	first := applied(t, s, 0)
	<-w.entered
	w.hold.Store(false)
	var later []*Group
	for i := range 5 {
		later = append(later, applied(t, s, int64(1+i)))
	}
	close(w.release)
	for _, g := range append([]*Group{first}, later...) {
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		g.Release()
	}
	if n := w.n.Load(); n != 2 {
		t.Fatalf("%d segment writes for 6 groups, the last 5 staged during the first's write; want 2", n)
	}
}
