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
)

// writeThreeSegments writes batches until the log has at least three segment files, none of
// them covered by a checkpoint (so start-up replays them all), and closes it.
func writeThreeSegments(t *testing.T, segFS *segfs.MemFS, pebFS vfs.FS, buffered bool) {
	t.Helper()
	l, err := Open(Options{Dir: "/data", MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, SegmentBytes: 8 << 10,
		SegmentFS: segFS, PebbleFS: pebFS, BufferedSegments: buffered, CheckpointInterval: time.Hour, noFinalCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
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
