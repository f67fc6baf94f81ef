package tier

import (
	"bytes"
	"errors"
	"testing"
)

func testFooter(entries []entry, dataLen int64) []byte {
	var b []byte
	for _, e := range entries {
		b = appendEntry(b, e)
	}
	return appendTrailer(b, 0, dataLen)
}

func TestFooterRoundTrip(t *testing.T) {
	in := []entry{
		{base: 100, lastDelta: 9, pos: 0, size: 200, maxTimestamp: 5},
		{base: 110, lastDelta: 0, pos: 200, size: 61, maxTimestamp: 7, attrs: 0x30},
		{base: 111, lastDelta: 3, pos: 261, size: 100, maxTimestamp: 6},
	}
	out, dataLen, err := parseFooter(testFooter(in, 361))
	if err != nil {
		t.Fatal(err)
	}
	if dataLen != 361 || len(out) != 3 {
		t.Fatalf("dataLen %d, %d entries", dataLen, len(out))
	}
	for i := range in {
		if out[i] != in[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, out[i], in[i])
		}
	}
	if out[2].end() != 115 {
		t.Fatalf("end %d", out[2].end())
	}
}

func TestFooterRejectsWhatDoesNotDescribeTheData(t *testing.T) {
	good := []entry{{base: 0, lastDelta: 0, pos: 0, size: 61}, {base: 1, lastDelta: 0, pos: 61, size: 61}}
	cases := map[string][]byte{
		"short":                []byte("INLTIER1"),
		"data length":          testFooter(good, 200),
		"overlap":              testFooter([]entry{good[0], {base: 0, pos: 61, size: 61}}, 122),
		"hole":                 testFooter([]entry{good[0], {base: 1, pos: 70, size: 61}}, 131),
		"smaller than a batch": testFooter([]entry{{base: 0, pos: 0, size: 20}}, 20),
	}
	crc := testFooter(good, 122)
	crc[0] ^= 1
	cases["crc"] = crc
	mag := testFooter(good, 122)
	mag[len(mag)-1] = 'X'
	cases["magic"] = mag
	for name, b := range cases {
		if _, _, err := parseFooter(b); !errors.Is(err, errBadFooter) {
			t.Errorf("%s: %v, want errBadFooter", name, err)
		}
	}
	if _, _, err := parseFooter(testFooter(good, 122)); err != nil {
		t.Fatalf("good footer: %v", err)
	}
}

func TestObjectKeysRoundTrip(t *testing.T) {
	id := [16]byte{1, 2, 3, 15: 0xff}
	for _, epoch := range []uint64{0, 1, 1 << 40} {
		k := objectKey("orders.v1_x-y", id, 7, 42, 1000, epoch)
		pk, ok := parseObjectKey(k)
		if !ok || pk.topic != "orders.v1_x-y" || pk.partition != 7 || pk.base != 42 || pk.end != 1000 || pk.id != "010203000000000000000000000000ff" || pk.epoch != epoch {
			t.Fatalf("%q -> %+v %v", k, pk, ok)
		}
	}
	// Keys written before the lease existed (no epoch) still parse, as epoch 0.
	if pk, ok := parseObjectKey("t/010203000000000000000000000000ff/0/00000000000000000001-00000000000000000002"); !ok || pk.epoch != 0 {
		t.Fatalf("a key without an epoch: %+v %v", pk, ok)
	}
	for _, bad := range []string{descriptionKey("t", id, 5), "t/x/0/1-2", "a/b/c", "t/010203000000000000000000000000ff/0/00000000000000000002-00000000000000000001",
		"t/010203000000000000000000000000ff/0/00000000000000000001-00000000000000000002-e1",
		"t/010203000000000000000000000000ff/0/00000000000000000001-00000000000000000002-e00000000000000000000",
		"t/010203000000000000000000000000ff/0/00000000000000000001-00000000000000000002-x00000000000000000001"} {
		if _, ok := parseObjectKey(bad); ok {
			t.Errorf("%q parsed as an object key", bad)
		}
	}
}

func TestDescriptionKeysRoundTrip(t *testing.T) {
	id := [16]byte{9}
	for _, epoch := range []uint64{0, 3} {
		k := descriptionKeyEpoch("orders", id, 1234567, epoch)
		dir, seq, e, ok := parseDescriptionKey(k)
		if !ok || dir != "orders/09000000000000000000000000000000" || seq != 1234567 || e != epoch {
			t.Fatalf("%q -> %q %d %d %v", k, dir, seq, e, ok)
		}
	}
	for _, bad := range []string{objectKey("t", id, 0, 1, 2, 0), "t/topic-00000000000000000001.json", "a/b/c/topic-00000000000000000001.json", "t/x/topic-1.json",
		"t/x/topic-00000000000000000001-e1.json", "t/x/topic-00000000000000000001-e00000000000000000000.json"} {
		if _, _, _, ok := parseDescriptionKey(bad); ok {
			t.Errorf("%q parsed as a description key", bad)
		}
	}
}

// The description in force is the newest epoch's, whatever the sequences (a node that lost
// the prefix may write a later sequence), then the highest sequence.
func TestNewerDescription(t *testing.T) {
	id := [16]byte{9}
	old, newer := descriptionKey("o", id, 5), descriptionKey("o", id, 6)
	e1late, e2early := descriptionKeyEpoch("o", id, 900, 1), descriptionKeyEpoch("o", id, 100, 2)
	for _, c := range []struct {
		a, b string
		want bool
	}{{newer, old, true}, {old, newer, false}, {e1late, newer, true}, {e2early, e1late, true}, {e1late, e2early, false}} {
		if got := newerDescription(c.a, c.b); got != c.want {
			t.Errorf("newerDescription(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func FuzzParseFooter(f *testing.F) {
	f.Add(testFooter([]entry{{base: 0, lastDelta: 4, pos: 0, size: 100, maxTimestamp: 1}}, 100))
	f.Add(testFooter([]entry{{base: 5, pos: 0, size: 61}, {base: 6, pos: 61, size: 70}}, 131))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, dataLen, err := parseFooter(b)
		if err != nil {
			return
		}
		// What decodes describes the data exactly: batches back to back from 0 to dataLen,
		// offsets rising, and encodes to the same bytes.
		pos := int64(0)
		for i, e := range entries {
			if int64(e.pos) != pos || (i > 0 && e.base < entries[i-1].end()) {
				t.Fatalf("entry %d: %+v", i, e)
			}
			pos += int64(e.size)
		}
		if pos != dataLen {
			t.Fatalf("entries end at %d, data length %d", pos, dataLen)
		}
		if again := testFooter(entries, dataLen); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded differently")
		}
	})
}

func FuzzParseObjectKey(f *testing.F) {
	f.Add(objectKey("t", [16]byte{}, 0, 0, 1, 0))
	f.Add(objectKey("t", [16]byte{}, 0, 0, 1, 2))
	f.Add("a/b/c/d")
	f.Fuzz(func(t *testing.T, key string) {
		k, ok := parseObjectKey(key)
		if !ok {
			return
		}
		if k.base < 0 || k.end <= k.base || k.partition < 0 {
			t.Fatalf("%q -> %+v", key, k)
		}
	})
}
