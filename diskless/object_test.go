package diskless

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"testing"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/idem"
	"inlet/objstore"
)

func TestObjectRoundTrip(t *testing.T) {
	id := [16]byte{1, 2, 3}
	obj := format.NewObject(nil)
	obj = format.AppendEntry(obj, id, 4, 0, batch(-1, 0, 2, 1))
	b2 := batch(5, 0, 3, 2)
	b2[7] = 2 // base offset 2
	obj = format.AppendEntry(obj, id, 1, 2, b2)
	obj = format.Seal(obj, Header{Epoch: 9, Incarnation: 8, Sequence: 7, Node: 6, Entries: 2})
	h, es, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if h != (Header{Version: format.CurrentVersion, Epoch: 9, Incarnation: 8, Sequence: 7, Node: 6, Entries: 2}) || len(es) != 2 ||
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
	v1 := format.Seal(format.AppendEntry(format.NewObject(nil), [16]byte{1}, 0, 0, b), Header{Version: 1, Sequence: 1, Entries: 1})
	h, es, err := Decode(v1)
	if err != nil || h.Version != 1 || len(es) != 1 || !bytes.Equal(es[0].Batch, b) || es[0].State != nil {
		t.Fatal(h, es, err)
	}
	st := format.Seal(format.AppendState(format.NewObject(nil), StateGroupOffsets, []byte{1}), Header{Version: 1, Sequence: 1, Entries: 1})
	if _, _, err := Decode(st); err == nil {
		t.Fatal("a version 1 object with a state entry decoded")
	}
	st = format.Seal(format.AppendState(format.NewObject(nil), StateGroupOffsets, []byte{1}), Header{Sequence: 1, Entries: 1})
	if _, es, err := Decode(st); err != nil || len(es) != 1 || !bytes.Equal(es[0].State, []byte{1}) || es[0].Partition != -StateGroupOffsets {
		t.Fatal(es, err)
	}
	unknown := format.Seal(format.AppendState(format.NewObject(nil), StateLogStart+1, nil), Header{Sequence: 1, Entries: 1})
	if _, _, err := Decode(unknown); err == nil {
		t.Fatal("a state entry of an unknown kind decoded")
	}
}

func TestLogKeys(t *testing.T) {
	if k := LogKey(42); k != "diskless/log/00000000000000000042" {
		t.Fatal(k)
	}
	for _, k := range []string{"diskless/log/00000000000000000000", "diskless/log/0000000000000000004x", "diskless/log/42", "x/log/00000000000000000042"} {
		if _, ok := format.ParseLogKey(k); ok {
			t.Fatalf("%s parsed", k)
		}
	}
	if n, ok := format.ParseLogKey(LogKey(7)); !ok || n != 7 {
		t.Fatal(n, ok)
	}
}

// FuzzDecode: Decode never panics on any input; what it accepts re-encodes to the same bytes
// (header and entries in order), and every batch it returns lies inside the input.
func FuzzDecode(f *testing.F) {
	obj := format.Seal(format.AppendEntry(format.NewObject(nil), [16]byte{9}, 0, 0, batch(-1, 0, 1, 1)), Header{Sequence: 1, Entries: 1})
	f.Add(obj)
	f.Add(obj[:50])
	f.Add(format.Seal(format.NewObject(nil), Header{Sequence: 2}))
	f.Add(format.Seal(format.AppendState(format.AppendEntry(format.NewObject(nil), [16]byte{9}, 0, 0, batch(-1, 0, 1, 1)), StateGroupOffsets,
		encodeGroupOp(nil, groupOp{Op: opCommit, Group: "g", Offsets: []groupOffset{{Topic: "t", Offset: 5}}})), Header{Sequence: 3, Entries: 2}))
	f.Add(format.Seal(format.AppendEntry(format.NewObject(nil), [16]byte{9}, 0, 0, batch(-1, 0, 1, 1)), Header{Version: 1, Sequence: 1, Entries: 1}))
	// A checkpoint (checkpoint.go): its own kinds of state entry.
	f.Add(format.Seal(format.AppendState(format.AppendState(format.NewObject(nil), StateCheckpoint, make([]byte, 16)), StatePartition,
		encodePart(nil, partRef{[16]byte{9}, 0}, &partFold{windows: map[int64]*idem.State{}})), Header{Sequence: 4, After: 3, Entries: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, es, err := Decode(b)
		if err != nil {
			return
		}
		re := format.NewObject(nil)
		for _, e := range es {
			if e.State != nil {
				re = format.AppendState(re, -e.Partition, e.State)
				continue
			}
			re = format.AppendEntry(re, e.TopicID, e.Partition, e.Base, e.Batch)
		}
		if re = format.Seal(re, h); !bytes.Equal(re, b) {
			t.Fatalf("accepted bytes do not re-encode the same")
		}
	})
}

// TestCRCCombine: the CRC-32C of a followed by b from the CRCs of each is the CRC of the
// whole, for lengths around every power of two up to 1 MiB (crcCombine's loop walks len(b)'s
// bits) and the empty b.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20+3)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 255, 256, 4095, 4096, 4097, 65535, 65536, 1 << 20, 1<<20 + 3} {
		a, b := data[:rng.IntN(100)], data[len(data)-n:]
		whole := crc32.Checksum(append(append([]byte(nil), a...), b...), format.Castagnoli)
		if got := format.CRCCombine(crc32.Checksum(a, format.Castagnoli), crc32.Checksum(b, format.Castagnoli), len(b)); got != whole {
			t.Fatalf("len(a) %d, len(b) %d: combined %08x, want %08x", len(a), n, got, whole)
		}
	}
}

// TestSealSumIsTheObjectsCRC: an object filled by Commit (batches small and large, their
// CRCs combined in, and state entries) and sealed from its running sum has the trailer a
// CRC of all its bytes gives, and decodes; so does one renumbered.
func TestSealSumIsTheObjectsCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	c := New(Config{Bucket: objstore.NewMemory(), CommitBytes: 4 << 20})
	c.next = 1 // as Recover leaves it on an empty bucket
	p := &batchlog.Partition{Topic: "d"}
	base := int64(0)
	for i := 0; i < 40; i++ {
		g := &batchlog.DisklessGroup{}
		for range 1 + rng.IntN(3) {
			b := sizedBatch(61+rng.IntN(3)*rng.IntN(20000), base)
			g.Appends = append(g.Appends, &batchlog.Append{Partition: p, Batch: b, BaseOffset: base})
			base++
		}
		c.Commit(g)
		if i%7 == 0 {
			c.commitState(StateTenants, []byte("tenants state"))
		}
	}
	o := c.objects[0]
	o.sealed = true
	for _, renumbered := range []bool{false, true} {
		if renumbered {
			o.buf = o.buf[:len(o.buf)-format.TrailerLen]
		}
		c.number(o)
		whole := bytes.Join(o.parts(), nil)
		body := whole[:len(whole)-format.TrailerLen]
		if want, got := crc32.Checksum(body, format.Castagnoli), binary.BigEndian.Uint32(whole[len(body):]); got != want {
			t.Fatalf("renumbered %v: trailer %08x, the object's CRC %08x", renumbered, got, want)
		}
		_, es, err := Decode(whole)
		if err != nil || len(es) != int(o.entries) {
			t.Fatalf("renumbered %v: %d entries, %v", renumbered, len(es), err)
		}
		if !reflect.DeepEqual(o.entryList(), es) {
			t.Fatalf("renumbered %v: the object's own list of entries differs from its decoding", renumbered)
		}
	}
}

// sizedBatch is a record batch of size bytes (at least the 61-byte header) at base, with its
// CRC right.
func sizedBatch(size int, base int64) []byte {
	b := make([]byte, size)
	for i := 61; i < size; i++ {
		b[i] = byte(i * 7)
	}
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
