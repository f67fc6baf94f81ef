package loadgen

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/hamba/avro/v2"

	"inlet/config"
	"inlet/schema"
)

const valueSchemaFile = "../examples/loadgen-value.avsc"

// loadRecord is examples/loadgen-value.avsc as hamba/avro decodes it.
type loadRecord struct {
	Producer int64   `avro:"producer"`
	Seq      int64   `avro:"seq"`
	Amount   float64 `avro:"amount"`
	Note     string  `avro:"note"`
}

// avroSizes cover the minimum, the sizes whose note length prefix must be padded at some
// sequence number (80: 65 bytes left for the note at seq < 64; 8209: 8194 left), the default
// and a large size.
var avroSizes = []int{AvroMinRecordSize, 79, 80, 81, 100, 1000, 8209, 8210}

// avroProducers and avroSeqs sit on both sides of every varint width boundary.
var (
	avroProducers = []uint32{0, 1, 15, 63, 64, 8191, 8192, math.MaxUint32}
	avroSeqs      = []uint64{0, 1, 63, 64, 8191, 8192, 1<<20 - 1, 1 << 20, 1<<27 - 1, 1 << 27, BitmapCapacity - 1}
)

func TestAvroValueRoundTrip(t *testing.T) {
	for _, size := range avroSizes {
		enc, dec := NewAvroEncoder(size, 7), NewAvroDecoder(size, 7)
		for _, producer := range avroProducers {
			for _, seq := range avroSeqs {
				v := enc.Append(nil, producer, seq)
				if len(v) != size {
					t.Fatalf("size %d, producer %d, seq %d: value is %d bytes", size, producer, seq, len(v))
				}
				p, s, err := dec.Decode(v)
				if err != nil || p != producer || s != seq {
					t.Fatalf("size %d: Decode(Append(%d, %d)) = %d, %d, %v", size, producer, seq, p, s, err)
				}
			}
		}
	}
}

// hamba/avro, a second implementation, must read every value as the record the encoder meant
// under the committed schema, and its own encoder must write the same bytes (one byte fewer
// where the note's length prefix is padded).
func TestAvroValueMatchesHamba(t *testing.T) {
	text, err := os.ReadFile(valueSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := avro.Parse(string(text))
	if err != nil {
		t.Fatal(err)
	}
	padded := 0
	for _, size := range avroSizes {
		enc := NewAvroEncoder(size, 7)
		for _, producer := range avroProducers {
			for _, seq := range avroSeqs {
				v := enc.Append(nil, producer, seq)
				if v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != 7 {
					t.Fatalf("size %d: header % x, want magic 0 and schema id 7", size, v[:5])
				}
				var rec loadRecord
				if err := avro.Unmarshal(sch, v[5:], &rec); err != nil {
					t.Fatalf("size %d, producer %d, seq %d: hamba: %v", size, producer, seq, err)
				}
				if rec.Producer != int64(producer) || rec.Seq != int64(seq) || rec.Amount != float64(seq)/100 ||
					string(enc.note[:len(rec.Note)]) != rec.Note {
					t.Fatalf("size %d: hamba read %+v for producer %d seq %d", size, rec, producer, seq)
				}
				again, err := avro.Marshal(sch, rec)
				if err != nil {
					t.Fatal(err)
				}
				switch len(v[5:]) - len(again) {
				case 0:
					if string(again) != string(v[5:]) {
						t.Fatalf("size %d, producer %d, seq %d: hamba encodes\n% x\nloadgen\n% x", size, producer, seq, again, v[5:])
					}
				case 1:
					padded++
				default:
					t.Fatalf("size %d: hamba re-encodes %d payload bytes as %d", size, len(v)-5, len(again))
				}
			}
		}
	}
	if padded == 0 {
		t.Fatal("no value exercised a padded note length prefix")
	}
}

// 80-byte values of producer 0 leave 65 bytes for the note at seq < 64: a 64-byte note needs
// a 2-byte prefix (66 bytes), a 63-byte one a 1-byte prefix (64). The prefix is padded to 2.
func TestAvroValueOverlongPrefix(t *testing.T) {
	v := NewAvroEncoder(80, DefaultSchemaID).Append(nil, 0, 5)
	// header 5, producer 1, seq 1, amount 8: the prefix starts at byte 15.
	if got := v[15:17]; got[0] != 63<<1|0x80 || got[1] != 0 {
		t.Fatalf("note length prefix % x, want 0xfe 0x00 (63, padded to 2 bytes)", got)
	}
	if len(v) != 80 {
		t.Fatalf("value is %d bytes", len(v))
	}
	sub := loadgenSubject(t)
	if err := sub.Validate(v); err != nil {
		t.Fatalf("inlet's validator refuses the padded prefix: %v", err)
	}
}

// loadgenSubject is the value subject examples/loadgen-avro.yaml binds to loadgen's default
// topic, as the broker resolves it.
func loadgenSubject(t *testing.T) interface{ Validate([]byte) error } {
	t.Helper()
	f, err := config.Load("../examples/loadgen-avro.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.Resolve(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg, err := schema.New(r.SchemaDefs, r.SchemaBindings)
	if err != nil {
		t.Fatal(err)
	}
	topic := reg.Topic([]byte(DefaultTopic))
	if topic == nil || topic.Value == nil {
		t.Fatalf("examples/loadgen-avro.yaml does not bind topic %q to a value subject", DefaultTopic)
	}
	if id := topic.Value.Latest().ID; id != int(DefaultSchemaID) {
		t.Fatalf("examples/loadgen-avro.yaml registers schema id %d, loadgen writes %d", id, DefaultSchemaID)
	}
	return topic.Value
}

// What loadgen writes in avro mode with its defaults is what the example config's broker
// accepts, and raw values are not.
func TestAvroValuesPassTheExampleBinding(t *testing.T) {
	sub := loadgenSubject(t)
	for _, size := range avroSizes {
		enc := NewAvroEncoder(size, DefaultSchemaID)
		for _, producer := range avroProducers {
			for _, seq := range avroSeqs {
				if err := sub.Validate(enc.Append(nil, producer, seq)); err != nil {
					t.Fatalf("size %d, producer %d, seq %d: %v", size, producer, seq, err)
				}
			}
		}
	}
	if err := sub.Validate(NewValue(100, 0, 0)); err == nil {
		t.Fatal("a raw value passed validation")
	}
	if err := sub.Validate(NewAvroEncoder(100, DefaultSchemaID+1).Append(nil, 0, 0)); err == nil {
		t.Fatal("a value with another schema id passed validation")
	}
}

func TestAvroDecodeRejectsMalformedValues(t *testing.T) {
	d := NewAvroDecoder(100, 7)
	good := NewAvroEncoder(100, 7).Append(nil, 1, 1000)
	mutate := func(f func(v []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, v := range map[string][]byte{
		"empty":          nil,
		"one byte short": good[:99],
		"one byte long":  append(append([]byte(nil), good...), 'a'),
		"magic byte":     mutate(func(v []byte) []byte { v[0] = 1; return v }),
		"schema id":      mutate(func(v []byte) []byte { v[4] = 8; return v }),
		"raw value":      NewValue(100, 1, 1000),
		"other size":     NewAvroEncoder(101, 7).Append(nil, 1, 1000)[:100],
		"flipped note":   mutate(func(v []byte) []byte { v[99] ^= 1; return v }),
		"flipped amount": mutate(func(v []byte) []byte { v[10] ^= 1; return v }),
		// zig-zag 3 is -2
		"negative producer": mutate(func(v []byte) []byte { v[5] = 3; return v }),
		// producer 1 as 0x82 0x00 instead of 0x02: decodes, but is not what loadgen wrote
		"overlong producer": append(append(append([]byte(nil), good[:5]...), 0x82, 0x00), good[6:99]...),
		"unterminated seq": mutate(func(v []byte) []byte {
			for i := 6; i < len(v); i++ {
				v[i] = 0xff
			}
			return v
		}),
	} {
		if _, _, err := d.Decode(v); !errors.Is(err, ErrMalformedValue) {
			t.Errorf("%s: Decode error = %v, want ErrMalformedValue", name, err)
		}
	}
}

// Producers write every Avro value into a recycled buffer; neither that nor decoding may
// allocate.
func TestAvroEncodeDecodeAllocateNothing(t *testing.T) {
	vals := newValues(FormatAvro, 100, DefaultSchemaID)
	buf := vals.buffer()
	d := NewAvroDecoder(100, DefaultSchemaID)
	seq := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		buf = vals.put(buf, 3, seq)
		seq += 977 // crosses varint widths
	}); n != 0 {
		t.Fatalf("put allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _, _ = d.Decode(buf) }); n != 0 {
		t.Fatalf("Decode allocates %v times", n)
	}
}

// A recycled buffer rewritten for another (producer, seq) equals a fresh value, in both
// formats, whatever widths the varints had before.
func TestValuesPutMatchesFreshValue(t *testing.T) {
	for _, format := range ValueFormats {
		vals := newValues(format, 100, DefaultSchemaID)
		fresh := func(producer uint32, seq uint64) []byte {
			return vals.put(vals.buffer(), producer, seq)
		}
		buf := vals.buffer()
		for _, seq := range []uint64{1 << 27, 0, 8192, 5} {
			buf = vals.put(buf, 2, seq)
			if len(buf) != 100 || string(buf) != string(fresh(2, seq)) {
				t.Fatalf("%s: recycled value for seq %d differs from a fresh one", format, seq)
			}
		}
		if format == FormatRaw && string(fresh(3, 4)) != string(NewValue(100, 3, 4)) {
			t.Fatal("raw values differ from NewValue")
		}
	}
}

func TestVerifierReadsAvroValues(t *testing.T) {
	acked := []*Bitmap{NewBitmap(), NewBitmap()}
	for p := range acked {
		for seq := uint64(0); seq < 3; seq++ {
			acked[p].Set(seq)
		}
	}
	v := NewVerifier(true, NewDecoder(FormatAvro, 100, DefaultSchemaID), 2, []uint64{3, 3}, acked)
	enc := NewAvroEncoder(100, DefaultSchemaID)
	for p := uint32(0); p < 2; p++ {
		for seq := uint64(0); seq < 3; seq++ {
			v.Observe(int32(seq%2), int64(seq), enc.Append(nil, p, seq))
		}
	}
	if r := v.Result(); !r.OK || r.Found != 6 {
		t.Fatalf("avro run: %+v", r)
	}
	v.Observe(0, 9, NewValue(100, 0, 0))
	if r := v.Result(); r.OK || r.Malformed != 1 {
		t.Fatalf("a raw value in an avro run: %+v", r)
	}
}

// FuzzAvroDecode: Decode never panics, and a value it accepts is byte for byte the value the
// encoder writes for the producer and sequence it returns (so it accepts nothing else).
func FuzzAvroDecode(f *testing.F) {
	enc := NewAvroEncoder(80, DefaultSchemaID)
	for _, seq := range []uint64{0, 64, 8192} {
		f.Add(enc.Append(nil, 3, seq))
	}
	f.Add(NewValue(80, 3, 0))
	d := NewAvroDecoder(80, DefaultSchemaID)
	f.Fuzz(func(t *testing.T, v []byte) {
		producer, seq, err := d.Decode(v)
		if err != nil {
			if !errors.Is(err, ErrMalformedValue) {
				t.Fatalf("error %v does not wrap ErrMalformedValue", err)
			}
			return
		}
		if again := enc.Append(nil, producer, seq); string(again) != string(v) {
			t.Fatalf("accepted % x as producer %d seq %d, which encode as % x", v, producer, seq, again)
		}
	})
}
