package segments

import "testing"

// The recent index answers for the newest batches, in order, and gives up (so the reader
// goes to Pebble) below its oldest entry, after a relocation and after forget.
func TestRecentIndex(t *testing.T) {
	var r recentIndex
	loc := func(i int) Loc { return Loc{Seg: 1, Pos: int64(i) * 100, Length: 100} }
	for i := range recentEntries + 8 {
		r.add(7, int64(i*3), loc(i), false)
	}
	collect := func(offset, limit int64) (bases []int64, ok bool) {
		ok, _ = r.each(7, offset, limit, func(base int64, l Loc) (bool, error) {
			if l.Pos != base/3*100 {
				t.Fatalf("base %d at %d", base, l.Pos)
			}
			bases = append(bases, base)
			return true, nil
		})
		return bases, ok
	}
	oldest := int64(8 * 3)
	if _, ok := collect(oldest-1, 1000); ok {
		t.Fatal("answered below its oldest entry")
	}
	got, ok := collect(oldest+4, oldest+10) // inside the batch at oldest+3, up to the one at oldest+9
	if !ok || len(got) != 3 || got[0] != oldest+3 || got[2] != oldest+9 {
		t.Fatalf("bases %v (ok %v)", got, ok)
	}
	r.add(7, oldest+3, loc(0), true) // relocated
	if _, ok := collect(oldest+4, 1000); ok {
		t.Fatal("answered after a relocation")
	}
	r.add(7, 1000, loc(1000/3), false)
	if got, ok := collect(1000, 1001); !ok || len(got) != 1 {
		t.Fatalf("after a restart: %v (ok %v)", got, ok)
	}
	r.forget(7)
	if _, ok := collect(1000, 1001); ok {
		t.Fatal("answered after forget")
	}
	if ok, _ := r.each(8, 0, 10, nil); ok {
		t.Fatal("answered for a partition it never saw")
	}
}
