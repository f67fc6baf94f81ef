package idem

import (
	"math"
	"testing"

	"inlet/wire"
)

// step is one batch offered to a State: Check, and Push when the verdict is Append.
type step struct {
	epoch    int16
	firstSeq int32
	count    int32
	verdict  Verdict
	code     int16
	dupBase  int64 // for Duplicate: the original base offset
}

func run(t *testing.T, steps []step) {
	t.Helper()
	s := NewState()
	next := int64(0)
	for i, st := range steps {
		v, dup, code := s.Check(st.epoch, st.firstSeq, st.count)
		if v != st.verdict || code != st.code {
			t.Fatalf("step %d %+v: got verdict %d code %d", i, st, v, code)
		}
		if v == Duplicate && dup.BaseOffset != st.dupBase {
			t.Fatalf("step %d: duplicate base offset %d, want %d", i, dup.BaseOffset, st.dupBase)
		}
		if v == Append {
			s.Push(st.epoch, st.firstSeq, st.count, next)
			next += int64(st.count)
		}
	}
}

func TestInSequenceBatchesAppend(t *testing.T) {
	run(t, []step{
		{0, 0, 10, Append, wire.ErrNone, 0},
		{0, 10, 5, Append, wire.ErrNone, 0},
		{0, 15, 1, Append, wire.ErrNone, 0},
	})
}

func TestDuplicateInWindowReturnsOriginalOffset(t *testing.T) {
	run(t, []step{
		{0, 0, 10, Append, wire.ErrNone, 0},  // offsets 0..9
		{0, 10, 10, Append, wire.ErrNone, 0}, // offsets 10..19
		{0, 0, 10, Duplicate, wire.ErrNone, 0},
		{0, 10, 10, Duplicate, wire.ErrNone, 10},
	})
}

func TestDuplicateOfEvictedBatchIsDuplicateSequenceNotOutOfOrder(t *testing.T) {
	steps := []step{}
	for i := int32(0); i < 7; i++ {
		steps = append(steps, step{0, i * 2, 2, Append, wire.ErrNone, 0})
	}
	// Batches 0 and 1 (seq 0..3) have left the five-batch window.
	steps = append(steps, step{0, 0, 2, Reject, wire.ErrDuplicateSequenceNumber, 0})
	steps = append(steps, step{0, 2, 2, Reject, wire.ErrDuplicateSequenceNumber, 0})
	steps = append(steps, step{0, 4, 2, Duplicate, wire.ErrNone, 4})
	run(t, steps)
}

func TestSequenceGapIsOutOfOrder(t *testing.T) {
	run(t, []step{
		{0, 0, 10, Append, wire.ErrNone, 0},
		{0, 11, 1, Reject, wire.ErrOutOfOrderSequenceNumber, 0},
	})
}

func TestOverlappingButNotEqualBatchIsOutOfOrder(t *testing.T) {
	run(t, []step{
		{0, 0, 10, Append, wire.ErrNone, 0},
		{0, 5, 10, Reject, wire.ErrOutOfOrderSequenceNumber, 0},
	})
}

func TestLowerEpochIsInvalidProducerEpoch(t *testing.T) {
	run(t, []step{
		{3, 0, 1, Append, wire.ErrNone, 0},
		{2, 1, 1, Reject, wire.ErrInvalidProducerEpoch, 0},
		// A fenced producer's exact duplicate is still fenced, not answered.
		{2, 0, 1, Reject, wire.ErrInvalidProducerEpoch, 0},
	})
}

func TestHigherEpochMustStartAtZero(t *testing.T) {
	run(t, []step{
		{0, 0, 5, Append, wire.ErrNone, 0},
		{1, 5, 1, Reject, wire.ErrOutOfOrderSequenceNumber, 0},
		{1, 0, 1, Append, wire.ErrNone, 0},
		// The old epoch's batches are forgotten with the bump.
		{1, 1, 1, Append, wire.ErrNone, 0},
	})
}

func TestUnknownProducerAcceptsAnyFirstSequence(t *testing.T) {
	run(t, []step{{0, 42, 3, Append, wire.ErrNone, 0}, {0, 45, 1, Append, wire.ErrNone, 0}})
}

func TestSequenceWrapsPastMaxInt32(t *testing.T) {
	start := int32(math.MaxInt32 - 4)
	if got := LastSeq(start, 10); got != 4 {
		t.Fatalf("LastSeq wrap = %d, want 4", got)
	}
	run(t, []step{
		{0, start, 5, Append, wire.ErrNone, 0}, // ends at MaxInt32
		{0, 0, 3, Append, wire.ErrNone, 0},
		{0, start, 5, Duplicate, wire.ErrNone, 0},
		{0, 3, 2, Append, wire.ErrNone, 0},
	})
	run(t, []step{
		{0, start, 10, Append, wire.ErrNone, 0}, // wraps inside the batch: last seq 4
		{0, 5, 1, Append, wire.ErrNone, 0},
		{0, start, 10, Duplicate, wire.ErrNone, 0},
	})
}

func TestStateRoundTripsThroughBinary(t *testing.T) {
	s := NewState()
	for i := int32(0); i < 8; i++ {
		s.Push(7, i*3, 3, int64(i)*100)
	}
	s.TxnFirstOffset, s.LastWrite = 512, 99
	enc := s.AppendBinary(nil)
	var got State
	if err := got.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if got.Epoch != s.Epoch || got.Len() != s.Len() || got.TxnFirstOffset != 512 || got.LastWrite != 99 {
		t.Fatalf("got %+v want %+v", got, s)
	}
	for i := 0; i < s.Len(); i++ {
		if got.At(i) != s.At(i) {
			t.Fatalf("batch %d: %+v != %+v", i, got.At(i), s.At(i))
		}
	}
	// Decisions survive the round trip.
	v, dup, _ := got.Check(7, 21, 3)
	if v != Duplicate || dup.BaseOffset != 700 {
		t.Fatalf("restored state lost the window: %v %+v", v, dup)
	}
}

// TestUnmarshalReadsOlderEncodings: a window written before LastWrite (v1) or before
// TxnFirstOffset (v2) restores with no open transaction.
func TestUnmarshalReadsOlderEncodings(t *testing.T) {
	v1 := []byte{1, 0, 3, 0}
	v2 := []byte{2, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 42}
	for _, b := range [][]byte{v1, v2} {
		var s State
		if err := s.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if s.Epoch != 3 || s.TxnFirstOffset != -1 || s.Len() != 0 {
			t.Fatalf("%x restored as %+v", b, s)
		}
	}
}

// TestEndTxnFencesAndClosesTheTransaction: a marker at a higher epoch replaces the window (the
// fenced epoch is refused after it), one at a lower epoch is refused, and either way the open
// transaction's first offset is what the marker clears.
func TestEndTxnFencesAndClosesTheTransaction(t *testing.T) {
	s := NewState()
	s.Push(1, 0, 5, 100)
	s.TxnFirstOffset = 100
	if code := s.EndTxn(0); code != wire.ErrInvalidProducerEpoch || s.TxnFirstOffset != 100 {
		t.Fatalf("lower-epoch marker: %d, first %d", code, s.TxnFirstOffset)
	}
	if code := s.EndTxn(2); code != wire.ErrNone || s.TxnFirstOffset != -1 || s.Epoch != 2 || s.Len() != 0 {
		t.Fatalf("bumped marker: %d %+v", code, s)
	}
	if v, _, code := s.Check(1, 5, 1); v != Reject || code != wire.ErrInvalidProducerEpoch {
		t.Fatalf("fenced epoch: %v %d", v, code)
	}
	if v, _, _ := s.Check(2, 0, 1); v != Append {
		t.Fatalf("new epoch from 0: %v", v)
	}
}

func TestUnmarshalRejectsCorruptInput(t *testing.T) {
	for _, b := range [][]byte{nil, {1}, {2, 0, 0, 0}, {3, 0, 0, 0}, {4, 0, 0, 0}, {1, 0, 0, 6}, {1, 0, 0, 1, 0}} {
		var s State
		if err := s.UnmarshalBinary(b); err == nil {
			t.Fatalf("accepted %x", b)
		}
	}
}

func TestCheckAndPushAllocateNothing(t *testing.T) {
	s := NewState()
	seq := int32(0)
	allocs := testing.AllocsPerRun(1000, func() {
		if v, _, _ := s.Check(0, seq, 4); v == Append {
			s.Push(0, seq, 4, int64(seq))
		}
		seq += 4
	})
	if allocs != 0 {
		t.Fatalf("allocs = %v", allocs)
	}
}

// FuzzState drives a State with arbitrary batches and checks invariants that must hold whatever
// the client sends: Check never panics; an Append verdict is only given to a batch that starts a
// new epoch or continues the newest batch; a Duplicate answer names a batch that was pushed with
// the same sequence range; the window never exceeds NumBatchesToRetain; and the binary encoding
// round-trips. Unmarshal of arbitrary bytes never panics.
func FuzzState(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 10, 0, 0, 0, 5})
	f.Add([]byte{1, 0, 0x7f, 0xff, 0xff, 0xfb, 0, 10, 1, 0, 0, 0, 0, 5, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var junk State
		_ = junk.UnmarshalBinary(data)
		s := NewState()
		pushed := map[[2]int32]int64{}
		off := int64(0)
		for len(data) >= 9 {
			epoch := int16(data[0] % 4)
			first := int32(uint32(data[1])<<24|uint32(data[2])<<16|uint32(data[3])<<8|uint32(data[4])) & math.MaxInt32
			count := int32(data[5])%20 + 1
			data = data[9:]
			v, dup, code := s.Check(epoch, first, count)
			switch v {
			case Append:
				if code != wire.ErrNone {
					t.Fatalf("append with code %d", code)
				}
				if last, ok := s.Last(); ok && epoch == s.Epoch && first != nextSeq(last.LastSeq) {
					t.Fatalf("appended out of sequence: last %d first %d", last.LastSeq, first)
				}
				s.Push(epoch, first, count, off)
				pushed[[2]int32{first, LastSeq(first, count)}] = off
				off += int64(count)
			case Duplicate:
				if _, ok := pushed[[2]int32{dup.FirstSeq, dup.LastSeq}]; !ok || dup.FirstSeq != first {
					t.Fatalf("duplicate of unknown batch %+v", dup)
				}
			}
			if s.Len() > NumBatchesToRetain {
				t.Fatal("window overflow")
			}
			var back State
			if err := back.UnmarshalBinary(s.AppendBinary(nil)); err != nil {
				t.Fatal(err)
			}
			if back.Epoch != s.Epoch || back.Len() != s.Len() {
				t.Fatal("round trip changed state")
			}
		}
	})
}
