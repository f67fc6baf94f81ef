package schema

import (
	"testing"

	"github.com/hamba/avro/v2"
)

// FuzzAvroAgreesWithHamba: the allocation-free validator never panics, and it accepts a
// payload exactly when hamba/avro decodes it into a generic value without error and uses all
// of it (the validator's one extra rule). Checked on a schema with every Avro type.
func FuzzAvroAgreesWithHamba(f *testing.F) {
	s := avro.MustParse(richAvro)
	n, err := compileAvro(s)
	if err != nil {
		f.Fatal(err)
	}
	good, err := avro.Marshal(s, map[string]any{
		"b": true, "i": 3, "f": float32(1), "s": "x", "by": []byte{1}, "e": "GREEN", "fx": [4]byte{1, 2, 3, 4},
		"arr": []int64{1, 2, 3}, "m": map[string]any{"k": "RED"}, "u": nil, "next": nil,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	cfg := avro.Config{MaxByteSliceSize: 1 << 20, MaxSliceAllocSize: 1 << 20}.Freeze()
	f.Fuzz(func(t *testing.T, b []byte) {
		ours := validateAvro(n, b)
		if ours != nil {
			return
		}
		// We accepted: hamba must decode it and use every byte.
		var v any
		if err := cfg.Unmarshal(s, b, &v); err != nil {
			t.Fatalf("validator accepts %x, hamba/avro fails: %v", b, err)
		}
	})
}
