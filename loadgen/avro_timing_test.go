package loadgen

import "testing"

// BenchmarkAvroValuePut is a producer's cost of writing one 100-byte Avro value into its
// recycled buffer (a raw value rewrites only its 12-byte header).
func BenchmarkAvroValuePut(b *testing.B) {
	vals := newValues(FormatAvro, 100, DefaultSchemaID)
	buf := vals.buffer()
	b.SetBytes(100)
	b.ReportAllocs()
	for i := range b.N {
		buf = vals.put(buf, 3, uint64(i))
	}
}
