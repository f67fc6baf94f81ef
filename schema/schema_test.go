package schema

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

const ordersAvro = `{"type":"record","name":"Order","namespace":"alice","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"}]}`

// richAvro exercises every Avro type, named-type reuse and recursion.
const richAvro = `{"type":"record","name":"Rich","fields":[
 {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"f","type":"float"},
 {"name":"s","type":"string"},{"name":"by","type":"bytes"},
 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
 {"name":"fx","type":{"type":"fixed","name":"Four","size":4}},
 {"name":"arr","type":{"type":"array","items":"long"}},
 {"name":"m","type":{"type":"map","values":"Color"}},
 {"name":"u","type":["null","string"]},
 {"name":"next","type":["null","Rich"]}]}`

func wireFormat(id int, payload []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, payload...)
}

func mustRegistry(t testing.TB, defs []Def, bindings []Binding) *Registry {
	t.Helper()
	r, err := New(defs, bindings)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAvroValidate(t *testing.T) {
	r := mustRegistry(t, []Def{{Subject: "o-value", Text: ordersAvro}}, []Binding{{Topic: "o", ValueSubject: "o-value"}})
	sub, _ := r.Subject("o-value")
	id := sub.Latest().ID
	good, err := avro.Marshal(avro.MustParse(ordersAvro), map[string]any{"id": int64(7), "amount": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Validate(wireFormat(id, good)); err != nil {
		t.Fatalf("valid record rejected: %v", err)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"truncated double", string(wireFormat(id, good[:len(good)-1])), "field amount"},
		{"trailing bytes", string(wireFormat(id, append(append([]byte{}, good...), 1))), "left after"},
		{"unknown id", string(wireFormat(id+1, good)), "not registered"},
		{"bad magic", "\x01" + string(wireFormat(id, good)[1:]), "magic byte"},
		{"short header", "\x00\x00", "shorter"},
		{"plain json", `{"id":1}`, "magic byte"},
	} {
		err := sub.Validate([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	rec := wireFormat(id, good)
	if n := testing.AllocsPerRun(100, func() { _ = sub.Validate(rec) }); n != 0 {
		t.Errorf("validating a good record allocates %v times", n)
	}
}

func TestAvroRichAgreesWithHamba(t *testing.T) {
	s := avro.MustParse(richAvro)
	n, err := compileAvro(s)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{
		"b": true, "i": 3, "f": float32(1), "s": "x", "by": []byte{1}, "e": "GREEN", "fx": [4]byte{1, 2, 3, 4},
		"arr": []int64{1, 2, 3}, "m": map[string]any{"k": "RED"}, "u": map[string]any{"string": "y"},
		"next": map[string]any{"Rich": map[string]any{
			"b": false, "i": 0, "f": float32(0), "s": "", "by": []byte{}, "e": "RED", "fx": [4]byte{},
			"arr": []int64{}, "m": map[string]any{}, "u": nil, "next": nil,
		}},
	}
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateAvro(n, b); err != nil {
		t.Fatalf("valid rich record rejected: %v", err)
	}
	for cut := 0; cut < len(b); cut++ {
		if validateAvro(n, b[:cut]) == nil {
			t.Fatalf("truncation at %d of %d accepted", cut, len(b))
		}
	}
}

func TestAvroDepthBounded(t *testing.T) {
	n, err := compileAvro(avro.MustParse(`{"type":"record","name":"L","fields":[{"name":"n","type":["null","L"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	deep := make([]byte, 100000)
	for i := range deep {
		deep[i] = 2 // union branch 1 (zig-zag 1), forever
	}
	if err := validateAvro(n, deep); err == nil {
		t.Fatal("endless nesting accepted")
	}
}

func TestAvroZeroSizeItemsBounded(t *testing.T) {
	n, err := compileAvro(avro.MustParse(`{"type":"array","items":"null"}`))
	if err != nil {
		t.Fatal(err)
	}
	// count = MaxInt64/2 items of null: must be refused, not looped over.
	b := binary.AppendUvarint(nil, uint64(1<<62)<<1)
	b = append(b, 0)
	if err := validateAvro(n, b); err == nil {
		t.Fatal("huge block of zero-size items accepted")
	}
}

const ordersJSON = `{"type":"object","properties":{"id":{"type":"integer"},"amount":{"type":"number"}},"required":["id","amount"]}`

func TestJSONValidate(t *testing.T) {
	r := mustRegistry(t, []Def{{Subject: "j-value", Type: JSON, Text: ordersJSON}}, []Binding{{Topic: "j", ValueSubject: "j-value"}})
	sub, _ := r.Subject("j-value")
	id := sub.Latest().ID
	if err := sub.Validate(wireFormat(id, []byte(`{"id":1,"amount":2.5}`))); err != nil {
		t.Fatalf("valid JSON rejected: %v", err)
	}
	for _, bad := range []string{`{"id":"x","amount":1}`, `{"id":1}`, `{"id":1,"amount":2} x`, `not json`} {
		if err := sub.Validate(wireFormat(id, []byte(bad))); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestIDsStableAndShared(t *testing.T) {
	defs := []Def{{Subject: "a-value", Text: ordersAvro}, {Subject: "b-value", Text: strings.ReplaceAll(ordersAvro, ",", " ,")}}
	r1 := mustRegistry(t, defs, nil)
	r2 := mustRegistry(t, []Def{defs[1], defs[0]}, nil)
	a1, _ := r1.Subject("a-value")
	b1, _ := r1.Subject("b-value")
	a2, _ := r2.Subject("a-value")
	if a1.Latest().ID != a2.Latest().ID || a1.Latest().ID != b1.Latest().ID {
		t.Fatalf("ids differ: %d %d %d", a1.Latest().ID, a2.Latest().ID, b1.Latest().ID)
	}
	if got := r1.SubjectsOf(a1.Latest().ID); len(got) != 2 {
		t.Fatalf("SubjectsOf: %d entries", len(got))
	}
	if _, ok := r1.Find("a-value", Avro, `{"type":"record","name":"Order","namespace":"alice","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"}]}`); !ok {
		t.Fatal("Find misses an equal schema")
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name     string
		defs     []Def
		bindings []Binding
		want     string
	}{
		{"bad avro", []Def{{Subject: "s", Text: `{"type":"record"}`}}, nil, "subject s"},
		{"bad type", []Def{{Subject: "s", Type: "PROTOBUF", Text: `x`}}, nil, "PROTOBUF"},
		{"dup version", []Def{{Subject: "s", Text: `"long"`, Version: 1}, {Subject: "s", Text: `"int"`, Version: 1}}, nil, "twice"},
		{"id clash", []Def{{Subject: "s", Text: `"long"`, ID: 5}, {Subject: "t", Text: `"int"`, ID: 5}}, nil, "different schema"},
		{"unknown subject", nil, []Binding{{Topic: "x", ValueSubject: "nope"}}, "not defined"},
	} {
		if _, err := New(tc.defs, tc.bindings); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
