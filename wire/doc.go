// Package wire is Inlet's hand-written decoder and encoder for the produce hot
// path: request headers, Produce requests (v3..v12), Produce responses, and
// magic-2 record batches (DefaultRecordBatch).
//
// Everything else in the protocol goes through kmsg; only the messages every
// produced byte crosses are written by hand, because kmsg's decoder copies
// strings and allocates a fresh tree per request.
//
// # Aliasing
//
// Decoders never copy: every []byte they return (ClientID, TransactionalID,
// topic names, Records, record keys and values) is a sub-slice of the input,
// capped with a full slice expression so that an append by the caller cannot
// overwrite the bytes that follow. The results are valid for as long as the
// caller keeps the input unmodified; reuse the input buffer and they change
// under you.
//
// # Allocation
//
// ProduceRequest.Decode, ValidateProduceBatch, ProduceResponse.AppendTo,
// ParseRequestHeader and ForEachRecord on an uncompressed batch allocate
// nothing once their reused buffers have grown; the tests pin this with
// testing.AllocsPerRun. Errors allocate (fmt) only on the failure path.
//
// # Hostile input
//
// Every length read from the wire is checked against the bytes that remain
// before it is used, so a decoder never reads past its input, never panics,
// and never allocates more than a constant times len(input) (array lengths are
// checked against the minimum encoded size of one element before a slice
// grows). Decompression is bounded by MaxDecompressedBytes and
// MaxCompressionRatio, and in memory (inflate.go): ValidateRecords and
// KeylessRecords check a compressed batch as it inflates, through a 64 KiB
// window, and what decompressors and whole decompressed batches hold comes
// from one budget of InflateBudgetBytes, whatever the number of callers. The
// fuzz targets in fuzz_test.go state and check these invariants.
package wire
