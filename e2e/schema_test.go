package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"inlet/registry"
	"inlet/schema"
	"inlet/server"
)

const orderSchema = `{"type":"record","name":"Order","namespace":"alice","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"}]}`

const eventSchema = `{"type":"object","properties":{"kind":{"type":"string"},"n":{"type":"integer"}},"required":["kind"]}`

type order struct {
	ID     int64   `avro:"id"`
	Amount float64 `avro:"amount"`
}

// schemaBroker serves topic "orders" bound to the Avro subject orders-value, "events" bound
// to the JSON Schema subject events-value, and the registry on a random port.
func schemaBroker(t *testing.T) (*broker, *schema.Registry, string) {
	t.Helper()
	reg, err := schema.New([]schema.Def{
		{Subject: "orders-value", Text: orderSchema},
		{Subject: "events-value", Type: schema.JSON, Text: eventSchema},
	}, []schema.Binding{{Topic: "orders", ValueSubject: "orders-value"}, {Topic: "events", ValueSubject: "events-value"}})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := registry.Start("127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close(context.Background()) })
	b := startBroker(t, func(c *server.Config) { c.Schemas = reg })
	return b, reg, "http://" + rs.Addr()
}

// orderSerde looks the latest orders-value schema up in Inlet's registry, as a producer with
// use.latest.version=true does, and registers it with a pkg/sr serde.
func orderSerde(ctx context.Context, t *testing.T, url string) (*sr.Serde, int) {
	t.Helper()
	rcl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := rcl.SchemaByVersion(ctx, "orders-value", -1)
	if err != nil {
		t.Fatalf("registry lookup: %v", err)
	}
	s, err := avro.Parse(ss.Schema.Schema)
	if err != nil {
		t.Fatal(err)
	}
	var serde sr.Serde
	serde.Register(ss.ID, order{},
		sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }),
		sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(s, b, v) }))
	return &serde, ss.ID
}

// TestAvroThroughRegistry: kgo producing Avro in Confluent wire format through pkg/sr's
// serde, the schema id found in Inlet's registry; the records come back and decode.
func TestAvroThroughRegistry(t *testing.T) {
	b, _, url := schemaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	serde, _ := orderSerde(ctx, t, url)
	b.createTopic("orders", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		v, err := serde.Encode(order{ID: int64(i), Amount: float64(i) * 1.5})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce valid Avro: %v", err)
	}
	got := kgoConsume(ctx, t, b.addr, "orders", 1, 50)
	for i, g := range got {
		var o order
		if err := serde.Decode(g.value, &o); err != nil || o.ID != int64(i) || o.Amount != float64(i)*1.5 {
			t.Fatalf("record %d decodes to %+v (%v)", i, o, err)
		}
	}
}

// TestBadRecordRejectsBatchIdempotent: an idempotent kgo producer sends good batches, then a
// batch whose middle record does not decode (rejected whole: INVALID_RECORD, nothing
// stored), then good batches again, which are stored without OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestBadRecordRejectsBatchIdempotent(t *testing.T) {
	b, _, url := schemaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serde, id := orderSerde(ctx, t, url)
	b.createTopic("orders", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	good := func(i int) *kgo.Record {
		v, err := serde.Encode(order{ID: int64(i), Amount: 1})
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: "orders", Value: v}
	}
	// produce sends recs together (one batch: they are buffered within one linger).
	produce := func(recs ...*kgo.Record) []error {
		var wg sync.WaitGroup
		errs := make([]error, len(recs))
		for i, r := range recs {
			wg.Add(1)
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) { errs[i] = err; wg.Done() })
		}
		wg.Wait()
		return errs
	}
	for _, err := range produce(good(0), good(1), good(2)) {
		if err != nil {
			t.Fatalf("first good batch: %v", err)
		}
	}
	bad := make([]byte, 5, 8)
	bad[0] = 0
	binary.BigEndian.PutUint32(bad[1:], uint32(id))
	bad = append(bad, 0x02, 0x00) // id 1, then the double is missing
	errs := produce(good(100), &kgo.Record{Topic: "orders", Value: bad}, good(101))
	for i, err := range errs {
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("record %d of the bad batch: %v, want INVALID_RECORD", i, err)
		}
	}
	for round := 0; round < 3; round++ {
		for _, err := range produce(good(3+2*round), good(4+2*round)) {
			if err != nil {
				t.Fatalf("good batch after the rejected one: %v", err)
			}
		}
	}
	if hw := b.highWatermark("orders", 0); hw != 9 {
		t.Fatalf("high watermark %d, want 9 (3 + 6 good records; the bad batch stores nothing)", hw)
	}
	got := kgoConsume(ctx, t, b.addr, "orders", 1, 9)
	for i, g := range got {
		var o order
		if err := serde.Decode(g.value, &o); err != nil || o.ID != int64(i) {
			t.Fatalf("record %d: %+v %v", i, o, err)
		}
	}
}

// TestSchemaRecordErrors checks the response of a rejected batch on the wire: INVALID_RECORD,
// one RecordErrors entry per bad record (v8+) and a message naming the first; an unknown
// schema id and a value without the wire-format header are rejected; JSON Schema topics
// validate too; unbound topics take anything.
func TestSchemaRecordErrors(t *testing.T) {
	b, reg, _ := schemaBroker(t)
	b.createTopic("orders", 1)
	b.createTopic("events", 1)
	sub, _ := reg.Subject("orders-value")
	id := sub.Latest().ID
	enc := func(schemaID int, payload []byte) []byte {
		out := []byte{0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(out[1:], uint32(schemaID))
		return append(out, payload...)
	}
	goodPayload, _ := avro.Marshal(avro.MustParse(orderSchema), order{ID: 7, Amount: 2})
	rc := dialRaw(t, b.addr)

	spec := plainBatch(5, 1700000000000, "x")
	for i := range spec.records {
		spec.records[i].value = enc(id, goodPayload)
	}
	spec.records[1].value = enc(id+1, goodPayload)   // unknown schema id
	spec.records[3].value = []byte(`{"id":1}`)       // not in wire format
	spec.records[4].value = enc(id, goodPayload[:3]) // truncated
	res := rc.produceOne(9, "orders", 0, spec.encode())
	if res.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("error %d, want INVALID_RECORD", res.ErrorCode)
	}
	if len(res.ErrorRecords) != 3 || res.ErrorRecords[0].RelativeOffset != 1 || res.ErrorRecords[1].RelativeOffset != 3 || res.ErrorRecords[2].RelativeOffset != 4 {
		t.Fatalf("record errors %+v, want records 1, 3, 4", res.ErrorRecords)
	}
	if res.ErrorMessage == nil || !strings.Contains(*res.ErrorMessage, "record 1") || !strings.Contains(*res.ErrorMessage, "not registered") {
		t.Fatalf("error message %v does not name record 1 and its unknown id", res.ErrorMessage)
	}
	if hw := b.highWatermark("orders", 0); hw != 0 {
		t.Fatalf("rejected batch stored: high watermark %d", hw)
	}
	// v7 has no RecordErrors: the code alone.
	if res := rc.produceOne(7, "orders", 0, spec.encode()); res.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("v7: error %d", res.ErrorCode)
	}

	// Unknown schema id alone.
	one := plainBatch(1, 1700000000000, "y")
	one.records[0].value = enc(12345, goodPayload)
	if res := rc.produceOne(9, "orders", 0, one.encode()); res.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("unknown schema id: error %d", res.ErrorCode)
	}
	// A tombstone (null value) is not validated (Confluent's deserializers read null as null).
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("k"), Value: nil}).FirstErr(); err != nil {
		t.Fatalf("tombstone: %v", err)
	}

	// JSON Schema.
	evID := 0
	if es, ok := reg.Subject("events-value"); ok {
		evID = es.Latest().ID
	}
	ev := plainBatch(2, 1700000000000, "e")
	ev.records[0].value = enc(evID, []byte(`{"kind":"click","n":1}`))
	ev.records[1].value = enc(evID, []byte(`{"kind":"click"}`))
	if res := rc.produceOne(9, "events", 0, ev.encode()); res.ErrorCode != 0 {
		t.Fatalf("valid JSON batch: error %d %v", res.ErrorCode, res.ErrorMessage)
	}
	ev.records[1].value = enc(evID, []byte(`{"n":"two"}`))
	res = rc.produceOne(9, "events", 0, ev.encode())
	if res.ErrorCode != kerr.InvalidRecord.Code || len(res.ErrorRecords) != 1 || res.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("invalid JSON batch: error %d, record errors %+v", res.ErrorCode, res.ErrorRecords)
	}

	// A topic without a schema accepts anything.
	if res := rc.produceOne(9, "free", 0, plainBatch(3, 1700000000000, "f").encode()); res.ErrorCode != 0 {
		t.Fatalf("unbound topic: error %d", res.ErrorCode)
	}
}

// TestRegistryEndpoints checks every registry endpoint through franz-go's pkg/sr client (the
// shapes it expects) and the read-only answers.
func TestRegistryEndpoints(t *testing.T) {
	_, reg, url := schemaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := reg.Subject("orders-value")
	id := sub.Latest().ID

	subjects, err := rcl.Subjects(ctx)
	if err != nil || strings.Join(subjects, ",") != "events-value,orders-value" {
		t.Fatalf("Subjects: %v %v", subjects, err)
	}
	versions, err := rcl.SubjectVersions(ctx, "orders-value")
	if err != nil || len(versions) != 1 || versions[0] != 1 {
		t.Fatalf("SubjectVersions: %v %v", versions, err)
	}
	for _, v := range []int{1, -1} {
		ss, err := rcl.SchemaByVersion(ctx, "orders-value", v)
		if err != nil || ss.ID != id || ss.Subject != "orders-value" || ss.Version != 1 || ss.Schema.Schema != orderSchema || ss.Type != sr.TypeAvro {
			t.Fatalf("SchemaByVersion(%d): %+v %v", v, ss, err)
		}
	}
	if text, err := rcl.SchemaTextByVersion(ctx, "orders-value", 1); err != nil || text != orderSchema {
		t.Fatalf("SchemaTextByVersion: %q %v", text, err)
	}
	if s, err := rcl.SchemaByID(ctx, id); err != nil || s.Schema != orderSchema {
		t.Fatalf("SchemaByID: %+v %v", s, err)
	}
	if text, err := rcl.SchemaTextByID(ctx, id); err != nil || text != orderSchema {
		t.Fatalf("SchemaTextByID: %q %v", text, err)
	}
	if svs, err := rcl.SchemaVersionsByID(ctx, id); err != nil || len(svs) != 1 || svs[0].Subject != "orders-value" || svs[0].Version != 1 {
		t.Fatalf("SchemaVersionsByID: %+v %v", svs, err)
	}
	if subs, err := rcl.SubjectsByID(ctx, id); err != nil || len(subs) != 1 || subs[0] != "orders-value" {
		t.Fatalf("SubjectsByID: %v %v", subs, err)
	}
	evs, _ := reg.Subject("events-value")
	if s, err := rcl.SchemaByID(ctx, evs.Latest().ID); err != nil || s.Type != sr.TypeJSON {
		t.Fatalf("JSON schema by id: %+v %v", s, err)
	}
	if types, err := rcl.SupportedTypes(ctx); err != nil || len(types) != 2 {
		t.Fatalf("SupportedTypes: %v %v", types, err)
	}
	if cs := rcl.Compatibility(ctx); len(cs) != 1 || cs[0].Err != nil || cs[0].Level != sr.CompatNone {
		t.Fatalf("Compatibility: %+v", cs)
	}
	if ms := rcl.Mode(ctx); len(ms) != 1 || ms[0].Err != nil || ms[0].Mode != sr.ModeReadOnly {
		t.Fatalf("Mode: %+v", ms)
	}
	// Lookup of a registered schema, written differently (whitespace).
	ss, err := rcl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: strings.ReplaceAll(orderSchema, ",", ", ")})
	if err != nil || ss.ID != id || ss.Version != 1 {
		t.Fatalf("LookupSchema: %+v %v", ss, err)
	}
	// Registration of a known schema answers its id (CreateSchema then reads the usages).
	if cs, err := rcl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderSchema}); err != nil || cs.ID != id {
		t.Fatalf("CreateSchema of a known schema: %+v %v", cs, err)
	}
	// Errors, with Confluent's codes.
	var re *sr.ResponseError
	_, err = rcl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `"string"`})
	if !errors.As(err, &re) || re.ErrorCode != 42205 || re.StatusCode != 422 {
		t.Fatalf("CreateSchema of a new schema: %v, want 422/42205", err)
	}
	_, err = rcl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: `"string"`})
	if !errors.As(err, &re) || re.ErrorCode != 40403 {
		t.Fatalf("LookupSchema of an unknown schema: %v, want 40403", err)
	}
	_, err = rcl.SchemaByVersion(ctx, "nope", 1)
	if !errors.As(err, &re) || re.ErrorCode != 40401 {
		t.Fatalf("unknown subject: %v, want 40401", err)
	}
	_, err = rcl.SchemaByVersion(ctx, "orders-value", 9)
	if !errors.As(err, &re) || re.ErrorCode != 40402 {
		t.Fatalf("unknown version: %v, want 40402", err)
	}
	_, err = rcl.SchemaByID(ctx, 1)
	if !errors.As(err, &re) || re.ErrorCode != 40403 {
		t.Fatalf("unknown id: %v, want 40403", err)
	}
	if _, err = rcl.DeleteSubject(ctx, "orders-value", sr.SoftDelete); !errors.As(err, &re) || re.ErrorCode != 42205 {
		t.Fatalf("DeleteSubject: %v, want 42205", err)
	}
	if res := rcl.SetMode(ctx, sr.ModeReadWrite); len(res) != 1 || !errors.As(res[0].Err, &re) || re.ErrorCode != 42205 {
		t.Fatalf("SetMode: %+v", res)
	}
}
