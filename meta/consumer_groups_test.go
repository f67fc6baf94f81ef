package meta

import (
	"bytes"
	"strings"
	"testing"
)

// TestConsumerGroupRecordsWriteOnlyWhatChanged: SaveConsumerGroup writes the records a change
// names and leaves the others as stored; a deleted member's two records go in the same batch;
// LoadGroups reads them back by group, never mixing a group whose name is a prefix of
// another's; DeleteGroup and Clear remove them.
func TestConsumerGroupRecordsWriteOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	defer func() { l.Close() }()
	rec := func(gen int32) *GroupRecord {
		return &GroupRecord{ProtocolType: "consumer", Generation: gen, Consumer: []byte(`{"epoch":1,"per_member":true}`)}
	}
	for _, g := range []string{"ab", "abc"} {
		err := l.SaveConsumerGroup(g, ConsumerGroupWrite{Record: rec(1), Topics: []byte("T-" + g),
			Subscriptions: map[string][]byte{"m1": []byte("s1-" + g), "m2": []byte("s2-" + g)},
			Assignments:   map[string][]byte{"m1": []byte("a1-" + g), "m2": []byte("a2-" + g)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A change of ab: m1's assignment moves, m2 leaves, m3 joins; the topics record stays.
	w := ConsumerGroupWrite{Record: rec(2), Assignments: map[string][]byte{"m1": []byte("a1'"), "m3": []byte("a3")},
		Subscriptions: map[string][]byte{"m3": []byte("s3")}, Deleted: []string{"m2"}}
	before := l.db.Metrics().WAL.BytesIn
	if err := l.SaveConsumerGroup("ab", w); err != nil {
		t.Fatal(err)
	}
	if n := l.db.Metrics().WAL.BytesIn - before; n > 512 {
		t.Errorf("the change wrote %d bytes to the WAL; its records are a few dozen", n)
	}
	if err := l.SaveConsumerGroup("ab", ConsumerGroupWrite{}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openTemp(t, dir)
	gs, err := l.LoadGroups()
	if err != nil {
		t.Fatal(err)
	}
	check := func(g string, gen int32, topics string, want map[string][2]string) {
		t.Helper()
		sg := gs[g]
		if sg == nil {
			t.Fatalf("group %s not loaded", g)
		}
		if sg.Record.Generation != gen || string(sg.ConsumerTopics) != topics {
			t.Errorf("%s: generation %d, topics %q; want %d, %q", g, sg.Record.Generation, sg.ConsumerTopics, gen, topics)
		}
		if len(sg.ConsumerMembers) != len(want) {
			t.Errorf("%s: members %v, want %v", g, sg.ConsumerMembers, want)
		}
		for id, w := range want {
			m := sg.ConsumerMembers[id]
			if m == nil || string(m.Subscription) != w[0] || string(m.Assignment) != w[1] {
				t.Errorf("%s: member %s is %+v, want %q", g, id, m, w)
			}
		}
	}
	check("ab", 2, "T-ab", map[string][2]string{"m1": {"s1-ab", "a1'"}, "m3": {"s3", "a3"}})
	check("abc", 1, "T-abc", map[string][2]string{"m1": {"s1-abc", "a1-abc"}, "m2": {"s2-abc", "a2-abc"}})

	// Clear (the group became classic) and DeleteGroup leave the other group alone.
	if err := l.SaveConsumerGroup("abc", ConsumerGroupWrite{Record: &GroupRecord{ProtocolType: "consumer", Generation: 9}, Clear: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteGroup("ab"); err != nil {
		t.Fatal(err)
	}
	if gs, err = l.LoadGroups(); err != nil {
		t.Fatal(err)
	}
	if _, ok := gs["ab"]; ok {
		t.Errorf("ab still loaded after DeleteGroup: %+v", gs["ab"])
	}
	check("abc", 9, "", nil)
	var left int
	if err := l.scan([]byte{kindConsumer}, func(k, v []byte) error { left++; return nil }); err != nil || left != 0 {
		t.Errorf("%d consumer group keys left (%v)", left, err)
	}
	if err := l.SaveConsumerGroup(strings.Repeat("g", maxKeyName+1), ConsumerGroupWrite{Record: rec(1)}); err != ErrNameTooLong {
		t.Errorf("a group name past the key's u16: %v, want ErrNameTooLong", err)
	}
}

// FuzzConsumerKey: the consumer group key codec round-trips every group, record kind and
// member id it writes, and parseConsumerKey never panics on arbitrary bytes; a key it accepts
// re-encodes to the same bytes and lies under its group's prefix.
func FuzzConsumerKey(f *testing.F) {
	f.Add("g", "m", []byte("G\x00\x01gsm"))
	f.Add("", "", []byte("G\x00\x00t"))
	f.Fuzz(func(t *testing.T, group, member string, raw []byte) {
		if len(group) <= maxKeyName {
			for _, sub := range []byte{consumerMemberSub, consumerMemberAsg} {
				if member == "" {
					break
				}
				g, s, m, err := parseConsumerKey(consumerKey(group, sub, member))
				if err != nil || g != group || s != sub || m != member {
					t.Fatalf("key of (%q, %c, %q) read back as (%q, %c, %q, %v)", group, sub, member, g, s, m, err)
				}
			}
		}
		if g, s, m, err := parseConsumerKey(raw); err == nil {
			k := consumerKey(g, s, m)
			if !bytes.Equal(k, raw) || !bytes.HasPrefix(k, consumerPrefix(g)) {
				t.Fatalf("%x parsed, re-encoded as %x", raw, k)
			}
		}
	})
}
