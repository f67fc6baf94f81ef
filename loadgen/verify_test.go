package loadgen

import (
	"strings"
	"testing"
)

const testRecordSize = 32

// run is a small run: sent[p] records per producer, acked[p] lists the acked sequences.
type run struct {
	sent  []uint64
	acked [][]uint64
}

func (r run) verifier(exactlyOnce bool, partitions int) *Verifier {
	bitmaps := make([]*Bitmap, len(r.sent))
	for p := range bitmaps {
		bitmaps[p] = NewBitmap()
		for _, seq := range r.acked[p] {
			bitmaps[p].Set(seq)
		}
	}
	return NewVerifier(exactlyOnce, NewValueDecoder(testRecordSize), partitions, r.sent, bitmaps)
}

// allAcked is two producers with everything acked: 0..3 and 0..2.
var allAcked = run{sent: []uint64{4, 3}, acked: [][]uint64{{0, 1, 2, 3}, {0, 1, 2}}}

// record is one record read back.
type record struct {
	partition int32
	producer  uint32
	seq       uint64
}

func observe(v *Verifier, recs ...record) {
	for i, r := range recs {
		v.Observe(r.partition, int64(i), NewValue(testRecordSize, r.producer, r.seq))
	}
}

// everything reads back allAcked once, round-robin over two partitions.
func everything() []record {
	return []record{{0, 0, 0}, {1, 0, 1}, {0, 0, 2}, {1, 0, 3}, {0, 1, 0}, {1, 1, 1}, {0, 1, 2}}
}

func TestVerifyAllPresentOnceIsOK(t *testing.T) {
	for _, exactlyOnce := range []bool{true, false} {
		v := allAcked.verifier(exactlyOnce, 2)
		observe(v, everything()...)
		r := v.Result()
		if !r.OK || r.Acked != 7 || r.Found != 7 || r.Read != 7 || r.Lost != 0 || len(r.Mismatches) != 0 {
			t.Fatalf("exactly once %v: %+v", exactlyOnce, r)
		}
	}
	v := allAcked.verifier(true, 2)
	observe(v, everything()...)
	if r := v.Result(); r.Verdict() != "exactly once: ok" {
		t.Fatalf("verdict %q", r.Verdict())
	}
	v = allAcked.verifier(false, 2)
	observe(v, everything()...)
	if r := v.Result(); r.Verdict() != "at least once: ok (0 duplicates)" {
		t.Fatalf("verdict %q", r.Verdict())
	}
}

func TestVerifyLostAckedRecordFailsBothModes(t *testing.T) {
	for _, exactlyOnce := range []bool{true, false} {
		v := allAcked.verifier(exactlyOnce, 2)
		recs := everything()
		observe(v, append(recs[:2:2], recs[3:]...)...) // producer 0 seq 2 never read
		r := v.Result()
		if r.OK || r.Lost != 1 || r.Found != 6 {
			t.Fatalf("exactly once %v: %+v", exactlyOnce, r)
		}
		want := Mismatch{Kind: Lost, Producer: 0, Seq: 2, Partition: -1, Offset: -1}
		if len(r.Mismatches) != 1 || r.Mismatches[0] != want {
			t.Fatalf("mismatches %+v, want [%+v]", r.Mismatches, want)
		}
		if !strings.HasSuffix(r.Verdict(), ": FAILED") {
			t.Fatalf("verdict %q", r.Verdict())
		}
	}
}

func TestVerifyDuplicateFailsExactlyOnceOnly(t *testing.T) {
	recs := append(everything(), record{1, 1, 1}) // producer 1 seq 1 twice, same partition

	v := allAcked.verifier(true, 2)
	observe(v, recs...)
	r := v.Result()
	if r.OK || r.Duplicates != 1 || r.Found != 7 || r.Read != 8 {
		t.Fatalf("exactly once: %+v", r)
	}
	if len(r.Mismatches) != 1 || r.Mismatches[0].Kind != Duplicated || r.Mismatches[0].Offset != 7 {
		t.Fatalf("exactly once mismatches %+v", r.Mismatches)
	}
	if r.Verdict() != "exactly once: FAILED" {
		t.Fatalf("verdict %q", r.Verdict())
	}

	v = allAcked.verifier(false, 2)
	observe(v, recs...)
	r = v.Result()
	if !r.OK || r.Duplicates != 1 {
		t.Fatalf("at least once: %+v", r)
	}
	if r.Verdict() != "at least once: ok (1 duplicates)" {
		t.Fatalf("verdict %q", r.Verdict())
	}
}

// A send that failed on the client may still have been stored (the reply was lost): reported,
// not a failure. Stored twice, it breaks exactly once like any other record.
func TestVerifyUnackedButPresent(t *testing.T) {
	partial := run{sent: []uint64{4, 3}, acked: [][]uint64{{0, 1, 3}, {0, 1, 2}}} // producer 0 seq 2 failed
	for _, exactlyOnce := range []bool{true, false} {
		v := partial.verifier(exactlyOnce, 2)
		observe(v, everything()...)
		r := v.Result()
		if !r.OK || r.UnackedPresent != 1 || r.Acked != 6 || r.Found != 7 {
			t.Fatalf("exactly once %v: %+v", exactlyOnce, r)
		}
	}
	v := partial.verifier(true, 2)
	observe(v, append(everything(), record{0, 0, 2})...)
	if r := v.Result(); r.OK || r.Duplicates != 1 {
		t.Fatalf("unacked record stored twice under exactly once: %+v", r)
	}

	// Not acked and not present: a plain failure, nothing to report.
	v = partial.verifier(true, 2)
	recs := everything()
	observe(v, append(recs[:2:2], recs[3:]...)...)
	if r := v.Result(); !r.OK || r.UnackedPresent != 0 || r.Lost != 0 {
		t.Fatalf("failed and absent: %+v", r)
	}
}

func TestVerifyMalformedAndUnknownFailBothModes(t *testing.T) {
	for _, exactlyOnce := range []bool{true, false} {
		v := allAcked.verifier(exactlyOnce, 2)
		observe(v, everything()...)
		v.Observe(0, 100, []byte("not a loadgen record"))
		bad := NewValue(testRecordSize, 0, 0)
		bad[testRecordSize-1] ^= 0xff
		v.Observe(1, 101, bad)
		r := v.Result()
		if r.OK || r.Malformed != 2 || r.Unknown != 0 {
			t.Fatalf("malformed, exactly once %v: %+v", exactlyOnce, r)
		}
		if m := r.Mismatches[0]; m.Kind != Malformed || m.Partition != 0 || m.Offset != 100 || m.Detail == "" {
			t.Fatalf("first mismatch %+v", m)
		}

		v = allAcked.verifier(exactlyOnce, 2)
		observe(v, everything()...)
		v.Observe(0, 100, NewValue(testRecordSize, 2, 0)) // no producer 2
		v.Observe(0, 101, NewValue(testRecordSize, 1, 3)) // producer 1 sent 0..2
		r = v.Result()
		if r.OK || r.Unknown != 2 || r.Malformed != 0 || r.Found != 7 {
			t.Fatalf("unknown, exactly once %v: %+v", exactlyOnce, r)
		}
	}
}

// Kafka keeps an idempotent producer's records in order within a partition.
func TestVerifyOutOfOrderWithinPartition(t *testing.T) {
	reordered := []record{{0, 0, 2}, {0, 0, 0}, {1, 0, 1}, {1, 0, 3}, {0, 1, 0}, {1, 1, 1}, {0, 1, 2}}
	v := allAcked.verifier(true, 2)
	observe(v, reordered...)
	r := v.Result()
	if r.OK || r.OutOfOrder != 1 {
		t.Fatalf("exactly once: %+v", r)
	}
	if m := r.Mismatches[0]; m.Kind != OutOfOrder || m.Seq != 0 || m.Detail != "after seq 2" {
		t.Fatalf("mismatch %+v", m)
	}

	v = allAcked.verifier(false, 2)
	observe(v, reordered...)
	if r := v.Result(); !r.OK || r.OutOfOrder != 1 {
		t.Fatalf("at least once: %+v", r)
	}

	// Different partitions are not ordered with respect to each other.
	v = allAcked.verifier(true, 2)
	observe(v, []record{{1, 0, 1}, {1, 0, 3}, {0, 0, 0}, {0, 0, 2}, {1, 1, 1}, {0, 1, 0}, {0, 1, 2}}...)
	if r := v.Result(); !r.OK {
		t.Fatalf("order across partitions: %+v", r)
	}
}

// A copy of a record read earlier is a duplicate, not also a reordering.
func TestVerifyDuplicateIsNotAlsoOutOfOrder(t *testing.T) {
	v := allAcked.verifier(false, 2)
	observe(v, append(everything(), record{0, 0, 0})...)
	if r := v.Result(); r.Duplicates != 1 || r.OutOfOrder != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestVerifyMismatchesAreCappedAndShareKinds(t *testing.T) {
	big := run{sent: []uint64{100}, acked: [][]uint64{nil}}
	for i := range uint64(100) {
		big.acked[0] = append(big.acked[0], i)
	}
	v := big.verifier(true, 1)
	// Seqs 0..49 read twice; 50..99 lost; 30 malformed values.
	for i := range uint64(50) {
		observe(v, record{0, 0, i}, record{0, 0, i})
	}
	for i := range 30 {
		v.Observe(0, int64(1000+i), nil)
	}
	r := v.Result()
	if r.Lost != 50 || r.Duplicates != 50 || r.Malformed != 30 || r.OK {
		t.Fatalf("%+v", r)
	}
	if len(r.Mismatches) != MaxMismatches {
		t.Fatalf("%d mismatches listed, want %d", len(r.Mismatches), MaxMismatches)
	}
	kinds := map[MismatchKind]int{}
	for _, m := range r.Mismatches {
		kinds[m.Kind]++
	}
	if kinds[Lost] < 6 || kinds[Duplicated] < 6 || kinds[Malformed] < 6 {
		t.Fatalf("kinds listed %v: one kind crowds out the others", kinds)
	}
	if r.Mismatches[0].Kind != Lost {
		t.Fatalf("first listed %v, want lost first", r.Mismatches[0].Kind)
	}
}

func TestMismatchString(t *testing.T) {
	for m, want := range map[Mismatch]string{
		{Kind: Lost, Producer: 3, Seq: 9, Partition: -1, Offset: -1}:                   "lost: producer 3 seq 9",
		{Kind: Duplicated, Producer: 1, Seq: 2, Partition: 4, Offset: 77, Detail: "x"}: "duplicated: producer 1 seq 2 at partition 4 offset 77 (x)",
	} {
		if got := m.String(); got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}
