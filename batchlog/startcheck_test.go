package batchlog

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/segfs"
)

// TestStartUpRefusesWithoutTheSegmentsDirectory: the catalog names a topic with data, and
// segments/ is gone (its name never synced, or removed by hand). Start-up must refuse, name
// the directory and what the metadata holds, and change nothing: with the directory back,
// the node starts and serves every record.
func TestStartUpRefusesWithoutTheSegmentsDirectory(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := l.CreateTopic("orders", 2, nil)
	for i := range 10 {
		submitWait(t, l, plain(topic.Partitions[i%2], 3, byte(i)))
	}
	l.Close()

	segs := filepath.Join(dir, "segments")
	if err := os.Rename(segs, segs+".away"); err != nil {
		t.Fatal(err)
	}
	l, err = Open(opts)
	if err == nil {
		l.Close()
		t.Fatal("start-up succeeded with segments/ gone and a topic in the catalog")
	}
	if !strings.Contains(err.Error(), segs+" is missing") || !strings.Contains(err.Error(), `topic "orders"`) {
		t.Fatalf("error does not name the directory and the topic: %v", err)
	}
	if _, err := os.Stat(segs); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused start-up made segments/ again: %v", err)
	}
	if err := os.Rename(segs+".away", segs); err != nil {
		t.Fatal(err)
	}
	l, err = Open(opts)
	if err != nil {
		t.Fatalf("with segments/ back: %v", err)
	}
	defer l.Close()
	for i, p := range mustTopic(t, l, "orders").Partitions {
		if p.HighWatermark() != 15 {
			t.Fatalf("partition %d: high watermark %d, want 15", i, p.HighWatermark())
		}
	}
}

// TestStartUpRefusesAMissingSegmentFile: segments/ is there but a segment file the index
// names is not (the newest, whose name a sync of the directory never covered; or every one).
// Replay finds nothing wrong in what is there, so the cross-check must stop start-up, naming
// the partition and the file.
func TestStartUpRefusesAMissingSegmentFile(t *testing.T) {
	for _, which := range []string{"last", "all"} {
		segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
		writeThreeSegments(t, segFS, pebFS, false)
		names, _ := segFS.List("/data/segments")
		victims := names[len(names)-1:]
		if which == "all" {
			victims = names
		}
		for _, name := range victims {
			if err := segFS.Remove("/data/segments/" + name); err != nil {
				t.Fatal(err)
			}
		}
		before := segFS.Files()
		l, err := reopenMem(segFS, pebFS)
		if err == nil {
			l.Close()
			t.Fatalf("%s segment files removed: start-up succeeded", which)
		}
		t.Logf("%s removed: %v", which, err)
		// The checkpoint's check (segment.go) or the cross-check, whichever meets it first,
		// names a missing file.
		named := false
		for _, name := range victims {
			named = named || strings.Contains(err.Error(), "/data/segments/"+name)
		}
		if !named || !strings.Contains(err.Error(), "start-up stopped") {
			t.Fatalf("%s segment files removed: error does not name a missing file: %v", which, err)
		}
		if !maps.EqualFunc(before, segFS.Files(), func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("%s segment files removed: a refused start-up changed the segment files", which)
		}
	}
}

// TestFreshNodeMakesItsDirectoriesDurable: on a file system that keeps only synced names, a
// node's first start followed at once by a power loss keeps segments/ (and its data dir):
// the first acknowledged batch is not built on a name the disk may not have.
func TestFreshNodeMakesItsDirectoriesDurable(t *testing.T) {
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	l, err := reopenMem(segFS, pebFS)
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := l.CreateTopic("t", 1, nil)
	submitWait(t, l, plain(topic.Partitions[0], 5, 'a'))
	var crashedSeg *segfs.MemFS
	crashedSeg = segFS.Crash(segfs.SyncedOnly, nil, func() {
		pebFS = pebFS.CrashClone(vfs.CrashCloneCfg{})
	})
	l.Close()
	if _, err := crashedSeg.List("/data/segments"); err != nil {
		t.Fatalf("segments/ lost at a power loss after the first acknowledged batch: %v", err)
	}
	l, err = reopenMem(crashedSeg, pebFS)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if hw := mustTopic(t, l, "t").Partitions[0].HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d after the power loss, want 5", hw)
	}
}
