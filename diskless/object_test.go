package diskless

import (
	"bytes"
	"testing"
)

func TestObjectRoundTrip(t *testing.T) {
	id := [16]byte{1, 2, 3}
	obj := newObject(nil)
	obj = appendEntry(obj, id, 4, 0, batch(-1, 0, 2, 1))
	b2 := batch(5, 0, 3, 2)
	b2[7] = 2 // base offset 2
	obj = appendEntry(obj, id, 1, 2, b2)
	obj = seal(obj, Header{Epoch: 9, Incarnation: 8, Sequence: 7, Node: 6, Entries: 2})
	h, es, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if h != (Header{Version: version, Epoch: 9, Incarnation: 8, Sequence: 7, Node: 6, Entries: 2}) || len(es) != 2 ||
		es[0].Partition != 4 || es[1].Base != 2 || !bytes.Equal(es[1].Batch, b2) || es[0].TopicID != id {
		t.Fatalf("%+v %+v", h, es)
	}
	for i := range obj {
		bad := bytes.Clone(obj)
		bad[i] ^= 0x40
		if _, _, err := Decode(bad); err == nil {
			t.Fatalf("a flipped bit at %d decoded", i)
		}
	}
	if _, _, err := Decode(obj[:len(obj)-1]); err == nil {
		t.Fatal("a cut object decoded")
	}
}

// TestVersion1ObjectsStillDecode: an object of the first format (batches only) reads as
// before, and one claiming a state entry in version 1 is refused.
func TestVersion1ObjectsStillDecode(t *testing.T) {
	b := batch(-1, 0, 1, 1)
	v1 := seal(appendEntry(newObject(nil), [16]byte{1}, 0, 0, b), Header{Version: 1, Sequence: 1, Entries: 1})
	h, es, err := Decode(v1)
	if err != nil || h.Version != 1 || len(es) != 1 || !bytes.Equal(es[0].Batch, b) || es[0].State != nil {
		t.Fatal(h, es, err)
	}
	st := seal(appendState(newObject(nil), StateGroupOffsets, []byte{1}), Header{Version: 1, Sequence: 1, Entries: 1})
	if _, _, err := Decode(st); err == nil {
		t.Fatal("a version 1 object with a state entry decoded")
	}
	st = seal(appendState(newObject(nil), StateGroupOffsets, []byte{1}), Header{Sequence: 1, Entries: 1})
	if _, es, err := Decode(st); err != nil || len(es) != 1 || !bytes.Equal(es[0].State, []byte{1}) || es[0].Partition != -StateGroupOffsets {
		t.Fatal(es, err)
	}
	unknown := seal(appendState(newObject(nil), lastStateKind+1, nil), Header{Sequence: 1, Entries: 1})
	if _, _, err := Decode(unknown); err == nil {
		t.Fatal("a state entry of an unknown kind decoded")
	}
}

func TestLogKeys(t *testing.T) {
	if k := LogKey(42); k != "diskless/log/00000000000000000042" {
		t.Fatal(k)
	}
	for _, k := range []string{"diskless/log/00000000000000000000", "diskless/log/0000000000000000004x", "diskless/log/42", "x/log/00000000000000000042"} {
		if _, ok := parseLogKey(k); ok {
			t.Fatalf("%s parsed", k)
		}
	}
	if n, ok := parseLogKey(LogKey(7)); !ok || n != 7 {
		t.Fatal(n, ok)
	}
}

// FuzzDecode: Decode never panics on any input; what it accepts re-encodes to the same bytes
// (header and entries in order), and every batch it returns lies inside the input.
func FuzzDecode(f *testing.F) {
	obj := seal(appendEntry(newObject(nil), [16]byte{9}, 0, 0, batch(-1, 0, 1, 1)), Header{Sequence: 1, Entries: 1})
	f.Add(obj)
	f.Add(obj[:50])
	f.Add(seal(newObject(nil), Header{Sequence: 2}))
	f.Add(seal(appendState(appendEntry(newObject(nil), [16]byte{9}, 0, 0, batch(-1, 0, 1, 1)), StateGroupOffsets,
		encodeGroupOp(nil, groupOp{Op: opCommit, Group: "g", Offsets: []groupOffset{{Topic: "t", Offset: 5}}})), Header{Sequence: 3, Entries: 2}))
	f.Add(seal(appendEntry(newObject(nil), [16]byte{9}, 0, 0, batch(-1, 0, 1, 1)), Header{Version: 1, Sequence: 1, Entries: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, es, err := Decode(b)
		if err != nil {
			return
		}
		re := newObject(nil)
		for _, e := range es {
			if e.State != nil {
				re = appendState(re, -e.Partition, e.State)
				continue
			}
			re = appendEntry(re, e.TopicID, e.Partition, e.Base, e.Batch)
		}
		if re = seal(re, h); !bytes.Equal(re, b) {
			t.Fatalf("accepted bytes do not re-encode the same")
		}
	})
}
