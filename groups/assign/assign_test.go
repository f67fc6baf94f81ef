package assign

import "testing"

// TestUniformAssignorBalancedAndSticky and TestRangeAssignorContiguous pin the assignors.
func TestUniformAssignorBalancedAndSticky(t *testing.T) {
	x, y := TopicID{1}, TopicID{2}
	in := Input{Members: []string{"m1", "m2", "m3"},
		Subscribed: map[string][]TopicID{"m1": {x, y}, "m2": {x, y}, "m3": {x, y}},
		Partitions: map[TopicID]int32{x: 5, y: 5}}
	out := Uniform(in)
	total := 0
	for _, m := range in.Members {
		n := out[m].Count()
		if n < 3 || n > 4 {
			t.Fatalf("%s has %d of 10", m, n)
		}
		total += n
	}
	if total != 10 {
		t.Fatalf("assigned %d of 10", total)
	}
	// A fourth member: everyone keeps what they can, the newcomer gets a fair share.
	in.Members = append(in.Members, "m4")
	in.Subscribed["m4"] = []TopicID{x, y}
	in.Previous = out
	out2 := Uniform(in)
	moved := 0
	for _, m := range []string{"m1", "m2", "m3"} {
		moved += out[m].Minus(out2[m]).Count()
	}
	if n := out2["m4"].Count(); n < 2 || n > 3 || moved != n {
		t.Fatalf("newcomer got %d, %d moved", n, moved)
	}
	// Heterogeneous: only m1 subscribes to y.
	in = Input{Members: []string{"m1", "m2"}, Subscribed: map[string][]TopicID{"m1": {x, y}, "m2": {x}},
		Partitions: map[TopicID]int32{x: 4, y: 2}}
	out = Uniform(in)
	if len(out["m2"][y]) != 0 || out["m1"].Count() != 3 || out["m2"].Count() != 3 {
		t.Fatalf("heterogeneous: %v", out)
	}
}

func TestRangeAssignorContiguous(t *testing.T) {
	x := TopicID{1}
	in := Input{Members: []string{"b", "a"}, Subscribed: map[string][]TopicID{"a": {x}, "b": {x}}, Partitions: map[TopicID]int32{x: 5}}
	out := Range(in)
	if got := out["a"][x]; len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("a: %v", got)
	}
	if got := out["b"][x]; len(got) != 2 || got[0] != 3 {
		t.Fatalf("b: %v", got)
	}
}

// TestPreferredAssignorFollowsTheMembers: the assignor most members name wins, ties go to the
// configured order, names not configured and members naming none do not count.
func TestPreferredAssignorFollowsTheMembers(t *testing.T) {
	conf := []string{UniformName, RangeName}
	for _, tc := range []struct {
		chosen []string
		want   string
	}{
		{nil, UniformName},
		{[]string{"", ""}, UniformName},
		{[]string{RangeName, ""}, RangeName},
		{[]string{RangeName, UniformName}, UniformName},
		{[]string{RangeName, RangeName, UniformName}, RangeName},
		{[]string{"sticky", "sticky", RangeName}, RangeName},
	} {
		if got := Preferred(conf, tc.chosen); got != tc.want {
			t.Errorf("Preferred(%q) = %q, want %q", tc.chosen, got, tc.want)
		}
	}
	if got := Preferred(nil, []string{RangeName}); got != "" {
		t.Errorf("no assignor configured: %q", got)
	}
}

// TestEncodeDecodeRoundTrip: the stored form reads back to the same sets, sorted; an empty
// set is stored as nothing; a topic id that is not 16 bytes of hex is an error.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	a := Partitions{{1}: {0, 2, 5}, {0xff, 3}: {1}}
	got, err := Decode(a.Encode())
	if err != nil || !got.Equal(a) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	if e := (Partitions{}).Encode(); e != nil {
		t.Fatalf("empty set encodes to %v", e)
	}
	if got, err := Decode(map[string][]int32{"01000000000000000000000000000000": {3, 1}}); err != nil || !got.Equal(Partitions{{1}: {1, 3}}) {
		t.Fatalf("unsorted partitions: %v, %v", got, err)
	}
	for _, k := range []string{"zz", "0100", ""} {
		if _, err := Decode(map[string][]int32{k: {0}}); err == nil {
			t.Errorf("topic id %q decoded", k)
		}
	}
}
