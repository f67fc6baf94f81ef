package batchlog

import (
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// windowsOn counts the committer's producer windows on partition id (an Inspect: it runs on
// the committer, which owns them).
func windowsOn(t *testing.T, l *Log, id uint32) (n int, open int) {
	t.Helper()
	done := make(chan struct{})
	l.Submit(&Request{Inspect: func() {
		for k, st := range l.producers {
			if k.partition == id {
				n++
				if st.TxnFirstOffset >= 0 {
					open++
				}
			}
		}
	}, Done: func(*Request) { close(done) }})
	<-done
	return n, open
}

func storedWindows(t *testing.T, l *Log, id uint32) int {
	t.Helper()
	n := 0
	if err := l.scan([]byte{kindProducer}, func(k, _ []byte) error {
		if len(k) == producerKeyLen && binary.BigEndian.Uint32(k[9:]) == id {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDeletedTopicDropsItsOpenTransactionWindows: deleting a topic drops the producer windows
// of its partitions from memory as well as from Pebble, open transactions included (no marker
// can reach a deleted partition, so such a window would neither end nor expire, and the next
// checkpoint would store it again). Windows of other topics stay. A window a data directory
// still holds for a deleted partition is dropped at start-up.
func TestDeletedTopicDropsItsOpenTransactionWindows(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20,
		Txns: verifyFunc(func(string, int64, int16, string, int32) bool { return true })})
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := l.CreateTopic("gone", 1, nil)
	keep, _ := l.CreateTopic("keep", 1, nil)
	pg, pk := gone.Partitions[0], keep.Partitions[0]
	wantOK(t, submitWait(t, l, transactional(pg, 1, 0, 0, 2, 'a')))
	wantOK(t, submitWait(t, l, transactional(pk, 2, 0, 0, 1, 'b')))
	if n, open := windowsOn(t, l, pg.ID); n != 1 || open != 1 {
		t.Fatalf("before the deletion: %d windows, %d open", n, open)
	}
	if err := l.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if n, _ := windowsOn(t, l, pg.ID); n != 0 {
		t.Fatalf("the deleted topic's open transaction window is still in memory")
	}
	if n, open := windowsOn(t, l, pk.ID); n != 1 || open != 1 {
		t.Fatalf("the other topic's window: %d, %d open", n, open)
	}
	wantOK(t, submitWait(t, l, plain(pk, 1, 'c')))
	l.Close()

	l = openTemp(t, dir)
	if got := storedWindows(t, l, pg.ID); got != 0 {
		t.Fatalf("after a restart, %d windows stored for the deleted partition", got)
	}
	if n, open := windowsOn(t, l, pk.ID); n != 1 || open != 1 {
		t.Fatalf("after a restart, the other topic's window: %d, %d open", n, open)
	}
	// A leftover written before deletions dropped windows: dropped at the next start-up.
	var k [producerKeyLen]byte
	putProducerKey(k[:], 9, pg.ID)
	v, closer, err := l.db.Get(func() []byte { var kk [producerKeyLen]byte; putProducerKey(kk[:], 2, pk.ID); return kk[:] }())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.db.Set(k[:], v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	closer.Close()
	l.Close()
	l = openTemp(t, dir)
	if n, _ := windowsOn(t, l, pg.ID); n != 0 {
		t.Fatal("a stored window of a deleted partition was loaded")
	}
	l.Close()
	l = openTemp(t, dir)
	defer l.Close()
	if got := storedWindows(t, l, pg.ID); got != 0 {
		t.Fatalf("the leftover window's key is still stored")
	}
}
