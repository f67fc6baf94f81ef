package loadgen

import (
	"errors"
	"math"
	"testing"
)

func TestValueRoundTrip(t *testing.T) {
	for _, size := range []int{ValueHeaderSize, 13, 100, 1000} {
		d := NewValueDecoder(size)
		for _, tc := range []struct {
			producer uint32
			seq      uint64
		}{{0, 0}, {15, 1}, {7, 1 << 40}, {math.MaxUint32, math.MaxUint64}} {
			v := NewValue(size, tc.producer, tc.seq)
			if len(v) != size {
				t.Fatalf("size %d: value is %d bytes", size, len(v))
			}
			p, s, err := d.Decode(v)
			if err != nil || p != tc.producer || s != tc.seq {
				t.Fatalf("size %d: Decode(NewValue(%d, %d)) = %d, %d, %v", size, tc.producer, tc.seq, p, s, err)
			}
		}
	}
}

// A producer rewrites only the header of a recycled buffer; the result must equal a fresh value.
func TestPutValueHeaderMatchesNewValue(t *testing.T) {
	v := NewValue(100, 1, 2)
	PutValueHeader(v, 3, 4)
	if string(v) != string(NewValue(100, 3, 4)) {
		t.Fatal("rewritten header differs from a fresh value")
	}
}

func TestPaddingIsDeterministicAndNotRepetitive(t *testing.T) {
	a, b := Padding(100), Padding(100)
	if string(a) != string(b) {
		t.Fatal("padding differs between calls")
	}
	if string(Padding(50)) != string(a[:50-ValueHeaderSize]) {
		t.Fatal("a shorter padding is not a prefix of a longer one")
	}
	distinct := map[byte]bool{}
	for _, c := range a {
		distinct[c] = true
	}
	if len(distinct) < 40 {
		t.Fatalf("padding has only %d distinct bytes in %d", len(distinct), len(a))
	}
}

func TestDecodeRejectsMalformedValues(t *testing.T) {
	d := NewValueDecoder(100)
	good := NewValue(100, 1, 1)
	corrupt := append([]byte(nil), good...)
	corrupt[99] ^= 1
	for name, v := range map[string][]byte{
		"empty":           nil,
		"header only":     good[:ValueHeaderSize],
		"one byte short":  good[:99],
		"one byte long":   append(append([]byte(nil), good...), 0),
		"flipped padding": corrupt,
	} {
		if _, _, err := d.Decode(v); !errors.Is(err, ErrMalformedValue) {
			t.Errorf("%s: Decode error = %v, want ErrMalformedValue", name, err)
		}
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	d := NewValueDecoder(100)
	v := NewValue(100, 1, 1)
	if n := testing.AllocsPerRun(100, func() { _, _, _ = d.Decode(v) }); n != 0 {
		t.Fatalf("Decode allocates %v times", n)
	}
}
