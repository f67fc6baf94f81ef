package reclaimplan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/batchlog/segments"
)

type entry struct {
	part   uint32
	base   int64
	seg    uint32
	length int
}

func index(t *testing.T, entries []entry) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, e := range entries {
		v := segments.AppendLoc(nil, segments.Loc{Seg: e.seg, Pos: e.base * 100, Length: e.length})
		if err := db.Set(segments.DataKey(e.part, e.base), v, nil); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestChoose: the end chosen is the furthest whose copies cost at most 1/CopyRatio of the
// bytes freed and at most MaxCopyBytes; a relocated prefix counts in the segments its
// entries lie in, whatever their offsets.
func TestChoose(t *testing.T) {
	sizes := map[uint32]int64{1: 1000, 2: 1000, 3: 1000}
	monotonic := []entry{
		{1, 0, 1, 10}, {1, 10, 2, 10}, {1, 20, 4, 10}, // partition 1
		{2, 0, 3, 500}, {2, 5, 4, 10}, // partition 2
	}
	relocated := []entry{
		{3, 0, 3, 10}, {3, 10, 1, 10}, {3, 20, 4, 10}, // partition 3, below 20: any order
	}
	for _, tc := range []struct {
		name    string
		entries []entry
		parts   []Partition
		policy  Policy
		target  uint32
		live    string
	}{
		{"CheapSegmentsGo", monotonic, []Partition{{ID: 1}, {ID: 2}}, Policy{MaxCopyBytes: 1 << 20, CopyRatio: 8}, 3, "1/0@1 1/10@2"},
		{"LowerCopyRatioCopiesMore", monotonic, []Partition{{ID: 1}, {ID: 2}}, Policy{MaxCopyBytes: 1 << 20, CopyRatio: 1}, 4, "1/0@1 1/10@2 2/0@3"},
		{"MaxCopyBytes", monotonic, []Partition{{ID: 1}, {ID: 2}}, Policy{MaxCopyBytes: 15, CopyRatio: 8}, 2, "1/0@1"},
		{"NoCopyKeepsSegmentsWithLiveBatches", monotonic, []Partition{{ID: 1}, {ID: 2}}, Policy{MaxCopyBytes: 1 << 20, CopyRatio: 8, NoCopy: true}, 0, ""},
		{"NoCopyDeletesEmptySegments", monotonic[3:], []Partition{{ID: 2}}, Policy{MaxCopyBytes: 1 << 20, CopyRatio: 8, NoCopy: true}, 3, ""},
		{"RelocatedPrefixBySegment", relocated, []Partition{{ID: 3, Below: 20}}, Policy{MaxCopyBytes: 1 << 20, CopyRatio: 8}, 4, "3/10@1 3/0@3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, target, err := Choose(index(t, tc.entries), tc.parts, 4, sizes, tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range live {
				got = append(got, fmt.Sprintf("%d/%d@%d", tc.parts[b.Part].ID, b.Base, b.Seg))
				if b.Pos != b.Base*100 {
					t.Fatalf("batch %d at %d, want %d", b.Base, b.Pos, b.Base*100)
				}
			}
			if target != tc.target || strings.Join(got, " ") != tc.live {
				t.Fatalf("target %d, live %q; want %d, %q", target, strings.Join(got, " "), tc.target, tc.live)
			}
		})
	}
}

// TestChooseIndexNamesGoneSegment: an index entry below the oldest segment there is names a
// deleted file, which cannot be: an error, not a choice.
func TestChooseIndexNamesGoneSegment(t *testing.T) {
	db := index(t, []entry{{7, 0, 1, 10}, {7, 10, 3, 10}})
	_, _, err := Choose(db, []Partition{{ID: 7}}, 4, map[uint32]int64{2: 1000, 3: 1000}, Policy{MaxCopyBytes: 1 << 20, CopyRatio: 8})
	if err == nil || !strings.Contains(err.Error(), "partition 7 batch 0 names segment 1") {
		t.Fatalf("err %v", err)
	}
}
