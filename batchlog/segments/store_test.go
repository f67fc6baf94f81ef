package segments

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/segfs"
)

// testBatch is a record batch of one record at base whose last byte is tag.
func testBatch(base int64, tag byte) []byte {
	b := make([]byte, 62)
	b[61] = tag
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint32(b[57:], 1)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func openTestStore(t *testing.T, dir string, db *pebble.DB, create bool) *Store {
	t.Helper()
	s, err := Open(segfs.OS, dir, db, create, Config{Buffered: true, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStoreAloneWritesReadsAndReplays: the store, with no log above it, writes groups through
// its seam methods, reads them back through a plan, and replays what the checkpoint does not
// cover after a reopen, in write order.
func TestStoreAloneWritesReadsAndReplays(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Open(segfs.OS, dir, db, false, Config{}); !errors.Is(err, ErrNoDirectory) {
		t.Fatalf("open without a segments directory: %v, want ErrNoDirectory", err)
	}
	s := openTestStore(t, dir, db, true)
	write := func(metadata bool, batches ...[]byte) {
		g := s.NewGroup(0)
		for _, b := range batches {
			g.SetData(7, int64(binary.BigEndian.Uint64(b)), b, false)
		}
		if metadata {
			g.CarriesMetadata()
		}
		if err := g.Apply(); err != nil {
			t.Fatal(err)
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		g.Release()
	}
	write(true, testBatch(0, 'a'), testBatch(1, 'b'))
	write(false, testBatch(2, 'c'))
	var plan ReadPlan
	if err := s.PlanRead(7, 1, 3, 1<<20, true, &plan); err != nil {
		t.Fatal(err)
	}
	got, err := plan.AppendTo([]byte("x"))
	plan.Release()
	if err != nil || len(got) != 1+2*62 || got[1+61] != 'b' || got[1+2*62-1] != 'c' {
		t.Fatalf("read %d bytes, err %v", len(got), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestStore(t, dir, db, false)
	defer s.Close()
	var tags []byte
	err = s.Replay(func(partition uint32, batch []byte, seg uint32, pos int64) error {
		if partition != 7 {
			t.Fatalf("replayed partition %d", partition)
		}
		tags = append(tags, batch[61])
		return nil
	}, func(uint32, int64) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tags, []byte("c")) {
		t.Fatalf("replayed %q after the checkpoint, want %q", tags, "c")
	}
	if st := s.Stats(); st.Files != 1 || st.Bytes == 0 {
		t.Fatalf("stats %+v", st)
	}
}
