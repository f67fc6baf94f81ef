package diskless

import (
	"inlet/diskless/format"
	"testing"
)

// BenchmarkSeal: sealing a 32 MiB commit object of 75 KiB batches (16 partitions' batches of
// a 1.2 MB produce request, as 16 idempotent producers flat out send them): from the
// entries' running CRC (sealSum, the committer's way) against a CRC of the whole object
// (seal), and what entrySum adds to Commit per batch.
func BenchmarkSeal(b *testing.B) {
	const size, batchBytes = 32 << 20, 75 << 10
	obj := format.NewObject(make([]byte, 0, size+format.TrailerLen))
	var sum uint32
	one := sizedBatch(batchBytes, 0)
	n := 0
	for len(obj)+format.EntryLen+batchBytes <= size {
		at := len(obj)
		obj = format.AppendEntry(obj, [16]byte{1}, 0, 0, one)
		sum = format.EntrySum(sum, obj[at:at+format.EntryLen], obj[at+format.EntryLen:])
		n++
	}
	h := Header{Sequence: 1, Entries: uint32(n)}
	b.Run("sealSum", func(b *testing.B) {
		b.SetBytes(int64(len(obj)))
		for b.Loop() {
			format.SealSum(obj, h, sum, int64(len(obj)-format.HeaderLen))
		}
	})
	b.Run("seal", func(b *testing.B) {
		b.SetBytes(int64(len(obj)))
		for b.Loop() {
			format.Seal(obj, h)
		}
	})
	b.Run("entrySum", func(b *testing.B) {
		entry := format.AppendEntry(nil, [16]byte{1}, 0, 0, one)
		b.SetBytes(int64(len(entry)))
		b.ReportAllocs()
		for b.Loop() {
			format.EntrySum(0, entry[:format.EntryLen], entry[format.EntryLen:])
		}
	})
}
