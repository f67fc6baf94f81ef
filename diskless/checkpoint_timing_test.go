package diskless

import (
	"testing"

	"inlet/diskless/format"
	"inlet/idem"
)

// BenchmarkCheckpointEncode: the part of Checkpoint done holding the fold's lock (the commit
// loop's landed waits for it): 100,000 full producer windows over 16 partitions encoded.
func BenchmarkCheckpointEncode(b *testing.B) {
	parts := map[partRef]*partFold{}
	for pid := int64(0); pid < 100000; pid++ {
		r := partRef{[16]byte{1}, int32(pid % 16)}
		f := parts[r]
		if f == nil {
			f = &partFold{windows: map[int64]*idem.State{}}
			parts[r] = f
		}
		w := idem.NewState()
		for i := int32(0); i < idem.NumBatchesToRetain; i++ {
			w.Push(0, i, 1, int64(i))
		}
		f.windows[pid] = &w
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		obj := format.NewObject(buf[:0])
		for r, f := range parts {
			obj = format.AppendState(obj, StatePartition, encodePart(nil, r, f))
		}
		b.SetBytes(int64(len(obj)))
		buf = obj
	}
}
