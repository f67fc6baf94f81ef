package diskless

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"inlet/meta"
)

// TestMergedGroupWritesApplyAsTheWritesInOrder: the fold of a group's record writes, applied
// alone to a catalog, leaves what the writes applied one by one leave: a member deleted then
// written again is there, one written then deleted is not, a Clear drops what came before it.
func TestMergedGroupWritesApplyAsTheWritesInOrder(t *testing.T) {
	rec := func(gen int32) *meta.GroupRecord { return &meta.GroupRecord{ProtocolType: "consumer", Generation: gen} }
	writes := []meta.ConsumerGroupWrite{
		{Record: rec(1), Topics: []byte("t1"), Subscriptions: map[string][]byte{"a": []byte("sa"), "b": []byte("sb")}},
		{Assignments: map[string][]byte{"a": []byte("aa"), "b": []byte("ab")}, Deleted: []string{"gone"}},
		{Deleted: []string{"a"}},
		{Record: rec(2), Subscriptions: map[string][]byte{"c": []byte("sc")}, DropTopics: true},
		{Subscriptions: map[string][]byte{"a": []byte("sa2")}},
		{Clear: true, Record: rec(3), Topics: []byte("t3"), Subscriptions: map[string][]byte{"d": []byte("sd")}},
		{Deleted: []string{"d", "x"}, Assignments: map[string][]byte{"e": []byte("ae")}},
	}
	for cut := range len(writes) + 1 {
		one, each := t.TempDir(), t.TempDir()
		m1, err := meta.Open(meta.Options{Dir: one})
		if err != nil {
			t.Fatal(err)
		}
		m2, err := meta.Open(meta.Options{Dir: each})
		if err != nil {
			t.Fatal(err)
		}
		var merged meta.ConsumerGroupWrite
		for _, w := range writes[:cut] {
			// Through the entry's encoding, as a start reads it.
			_, back, err := decodeGroupWrite(append(appendString16(nil, "g"), must(json.Marshal(w))...))
			if err != nil {
				t.Fatal(err)
			}
			mergeGroupWrite(&merged, back)
			if err := m2.SaveConsumerGroup("g", w); err != nil {
				t.Fatal(err)
			}
		}
		if err := m1.SaveConsumerGroup("g", merged); err != nil {
			t.Fatal(err)
		}
		g1, g2 := loadGroup(t, m1), loadGroup(t, m2)
		if string(must(json.Marshal(g1))) != string(must(json.Marshal(g2))) {
			t.Fatalf("after %d writes: merged %s, one by one %s", cut, must(json.Marshal(g1)), must(json.Marshal(g2)))
		}
		m1.Close()
		m2.Close()
	}
}

func loadGroup(t *testing.T, m *meta.Store) any {
	gs, err := m.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	g := gs["g"]
	if g == nil {
		return nil
	}
	members := map[string]meta.StoredConsumerMember{}
	for _, id := range slices.Sorted(maps.Keys(g.ConsumerMembers)) {
		members[id] = *g.ConsumerMembers[id]
	}
	return struct {
		Record  meta.GroupRecord
		Topics  []byte
		Members map[string]meta.StoredConsumerMember
	}{g.Record, g.ConsumerTopics, members}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzGroupWrite: decodeGroupWrite never panics, and what it accepts merges without panic.
func FuzzGroupWrite(f *testing.F) {
	f.Add(append(appendString16(nil, "g"), `{"Record":{"protocol_type":"consumer","generation":1},"Deleted":["a"]}`...))
	f.Add([]byte{0, 1, 'g', '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, w, err := decodeGroupWrite(b)
		if err != nil {
			return
		}
		var into meta.ConsumerGroupWrite
		mergeGroupWrite(&into, w)
		mergeGroupWrite(&into, w)
	})
}
