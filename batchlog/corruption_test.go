package batchlog

import (
	"errors"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/segfs"
	"inlet/wire"
)

// writeThreeSegments writes batches until the log has at least three segment files, none of
// them covered by a checkpoint (so start-up replays them all), and closes it.
func writeThreeSegments(t *testing.T, segFS *segfs.MemFS, pebFS vfs.FS, buffered bool) {
	t.Helper()
	l, err := Open(Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 8 << 10,
		SegmentFS: segFS, PebbleFS: pebFS, BufferedSegments: buffered, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l.withoutFinalCheckpoint()
	topic, _ := l.CreateTopic("t", 1, nil)
	for i := 0; ; i++ {
		submitWait(t, l, plain(topic.Partitions[0], 1, byte(i)))
		if names, _ := segFS.List("/data/segments"); len(names) >= 3 {
			submitWait(t, l, plain(topic.Partitions[0], 1, 'z'))
			break
		}
	}
	l.Close()
}

func reopenMem(segFS *segfs.MemFS, pebFS vfs.FS) (*Log, error) {
	return Open(Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 8 << 10,
		SegmentFS: segFS, PebbleFS: pebFS})
}

// TestCorruptSyncedSegmentStopsStartUp flips a bit in the synced data of a segment that is
// not the last one: that is not a torn write, so start-up must refuse with an error naming
// the file and the offset, and must change no file.
func TestCorruptSyncedSegmentStopsStartUp(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		for _, where := range []struct {
			name string
			off  int64
		}{{"entry header", 2}, {"record batch", segEntryHeader + 40}} {
			segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
			writeThreeSegments(t, segFS, pebFS, buffered)
			const victim = "/data/segments/0000000001.seg"
			if err := segFS.Corrupt(victim, where.off, 0x10); err != nil {
				t.Fatal(err)
			}
			before := segFS.Files()
			l, err := reopenMem(segFS, pebFS)
			if err == nil {
				l.Close()
				t.Fatalf("buffered=%v, flipped bit in the %s: start-up succeeded", buffered, where.name)
			}
			if !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "corrupt at 0") {
				t.Fatalf("buffered=%v, flipped bit in the %s: error does not name the file and offset: %v", buffered, where.name, err)
			}
			if !maps.EqualFunc(before, segFS.Files(), func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatalf("buffered=%v: a refused start-up changed the segment files", buffered)
			}
		}
	}
}

// TestReadErrorAtStartUpStopsIt makes reads of one segment fail while start-up replays it: a
// failing device is not a torn write, so nothing may be cut.
func TestReadErrorAtStartUpStopsIt(t *testing.T) {
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	writeThreeSegments(t, segFS, pebFS, false)
	names, _ := segFS.List("/data/segments")
	for _, victim := range []string{"/data/segments/" + names[1], "/data/segments/" + names[len(names)-1]} {
		before := segFS.Files()
		segFS.Inject(func(op segfs.Op, name string) error {
			if op == segfs.OpRead && name == victim {
				return syscall.EIO
			}
			return nil
		})
		l, err := reopenMem(segFS, pebFS)
		segFS.Inject(nil)
		if err == nil {
			l.Close()
			t.Fatalf("start-up succeeded with reads of %s failing", victim)
		}
		if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), victim) {
			t.Fatalf("error does not name %s and EIO: %v", victim, err)
		}
		if !maps.EqualFunc(before, segFS.Files(), func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatal("a refused start-up changed the segment files")
		}
	}
	// With the device healthy again, everything is there.
	l, err := reopenMem(segFS, pebFS)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if p := mustTopic(t, l, "t").Partitions[0]; p.HighWatermark() < 3 {
		t.Fatalf("high watermark %d after recovery", p.HighWatermark())
	}
}

// TestReopenAfterAnUnalignedCutAndAnEmptyGroup: a torn write cut inside a direct-written group
// (not at its block-aligned start), then a group that writes nothing (only duplicates) but
// moves the checkpoint, then a restart before anything else is written: the checkpoint names
// the block-aligned end, which the file must reach.
func TestReopenAfterAnUnalignedCutAndAnEmptyGroup(t *testing.T) {
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	opts := Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentFS: segFS, PebbleFS: pebFS,
		CheckpointInterval: -1}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := mustCreate(t, l, "t")
	submitWait(t, l, idempotent(p, 5, 0, 0, 1, 'a'))
	submitWait(t, l, idempotent(p, 5, 0, 1, 1, 'b'), idempotent(p, 5, 0, 2, 1, 'c'), idempotent(p, 5, 0, 3, 1, 'd'))
	// Pebble loses what it had not synced (the index, the checkpoints), and the group's last
	// entry is torn: its first bytes only.
	pebCrashed := pebFS.CrashClone(vfs.CrashCloneCfg{})
	segCrashed := segFS.Crash(segfs.SyncedOnly, nil, nil)
	l.Close()
	f, err := segCrashed.Open("/data/segments/0000000000.seg")
	if err != nil {
		t.Fatal(err)
	}
	torn := int64(blockSize + 2*(segEntryHeader+62) + segEntryHeader + 30) // inside 'd'
	if err := f.Truncate(torn); err != nil {
		t.Fatal(err)
	}
	f.Datasync()
	f.Close()

	opts.SegmentFS, opts.PebbleFS = segCrashed, pebCrashed
	if l, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	p = mustTopic(t, l, "t").Partitions[0]
	if p.HighWatermark() != 3 {
		t.Fatalf("high watermark %d after the cut, want 3", p.HighWatermark())
	}
	// Retries of 'b' and 'c' are duplicates: their group writes nothing, and checkpoints.
	r := submitWait(t, l, idempotent(p, 5, 0, 1, 1, 'b'), idempotent(p, 5, 0, 2, 1, 'c'))
	if r.Appends[0].BaseOffset != 1 || r.Appends[1].BaseOffset != 2 {
		t.Fatalf("retries answered at %d and %d", r.Appends[0].BaseOffset, r.Appends[1].BaseOffset)
	}
	l.Close()
	if l, err = Open(opts); err != nil {
		t.Fatalf("reopen after an empty group: %v", err)
	}
	defer l.Close()
	p = mustTopic(t, l, "t").Partitions[0]
	if r := submitWait(t, l, idempotent(p, 5, 0, 3, 1, 'd')); r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 3 {
		t.Fatalf("retry of the torn batch: %+v", r.Appends[0])
	}
}

func mustCreate(t *testing.T, l *Log, name string) *Partition {
	t.Helper()
	topic, err := l.CreateTopic(name, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return topic.Partitions[0]
}
