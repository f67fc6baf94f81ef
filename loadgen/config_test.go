package loadgen

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestZeroConfigGetsDefaults(t *testing.T) {
	s, err := Config{}.Settings()
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Brokers: []string{DefaultBroker}, Topic: DefaultTopic, Partitions: 16, Producers: 16,
		Idempotent: false, Acks: "all", MaxInFlight: 1, RecordSize: 100, ValueFormat: "raw", Key: "nil",
		Linger: 5 * time.Millisecond, BatchMaxBytes: 1_000_012, Compression: "none",
		MaxBufferedRecords: 100_000, MaxBufferedBytes: "unlimited", Partitioner: "uniform",
		RecordRetries: "unlimited", DeliveryTimeout: "none", ProduceTimeout: 10 * time.Second,
		FlushTimeout: 60 * time.Second, FranzGo: s.FranzGo,
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("settings\n%+v\nwant\n%+v", s, want)
	}
	if s, _ := (Config{Idempotent: true}).Settings(); s.MaxInFlight != 5 {
		t.Fatalf("idempotent max in flight %d, want 5", s.MaxInFlight)
	}
	if s, err := (Config{MaxInFlight: 5}).Settings(); err != nil || s.MaxInFlight != 5 {
		t.Fatalf("plain with --max-inflight 5: %d in flight, %v", s.MaxInFlight, err)
	}
	if s, err := (Config{Idempotent: true, MaxInFlight: 5}).Settings(); err != nil || s.MaxInFlight != 5 {
		t.Fatalf("idempotent with --max-inflight 5: %d in flight, %v", s.MaxInFlight, err)
	}
	if s, _ := (Config{Linger: NoLinger}).Settings(); s.Linger != 0 {
		t.Fatalf("NoLinger resolves to %v", s.Linger)
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	for name, cfg := range map[string]Config{
		"record smaller than header":  {RecordSize: ValueHeaderSize - 1},
		"record larger than batch":    {RecordSize: 1000, BatchMaxBytes: 1000},
		"batch below kgo minimum":     {BatchMaxBytes: 511},
		"unknown compression":         {Compression: "brotli"},
		"unknown partitioner":         {Partitioner: "hash"},
		"negative partitions":         {Partitions: -1},
		"negative producers":          {Producers: -3},
		"negative rate":               {Rate: -1},
		"negative records":            {Records: -1},
		"negative duration":           {Duration: -time.Second},
		"negative linger":             {Linger: -2},
		"negative max buffered":       {MaxBufferedRecords: -1},
		"unknown value format":        {ValueFormat: "protobuf"},
		"avro record below minimum":   {ValueFormat: FormatAvro, RecordSize: AvroMinRecordSize - 1},
		"negative schema id":          {ValueFormat: FormatAvro, SchemaID: -1},
		"negative max in flight":      {MaxInFlight: -1},
		"idempotent with 1 in flight": {Idempotent: true, MaxInFlight: 1},
	} {
		if _, err := cfg.Settings(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if s, err := (Config{Compression: "ZSTD", Partitioner: "Sticky"}).Settings(); err != nil ||
		s.Compression != "zstd" || s.Partitioner != "sticky" {
		t.Fatalf("case-insensitive names: %+v, %v", s, err)
	}
}

// The options must pin what Settings prints; kgo's own defaults differ (snappy, 10ms linger,
// 50,000 buffered records, the uniform-bytes partitioner). kgo.NewClient does not connect.
func TestProducerOptsPinKgoSettings(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		cfg, err := Config{Idempotent: idempotent, Linger: NoLinger}.normalize()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(cfg.producerOpts(3)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for name, c := range map[string]struct{ got, want any }{
			"compression":     {cl.OptValue(kgo.ProducerBatchCompression), []kgo.CompressionCodec{kgo.NoCompression()}},
			"linger":          {cl.OptValue(kgo.ProducerLinger), time.Duration(0)},
			"batch max bytes": {cl.OptValue(kgo.ProducerBatchMaxBytes), DefaultBatchMaxBytes},
			"max buffered":    {cl.OptValue(kgo.MaxBufferedRecords), int64(DefaultMaxBufferedRecords)},
			"acks":            {cl.OptValue(kgo.RequiredAcks), kgo.AllISRAcks()},
			"not idempotent":  {cl.OptValue(kgo.DisableIdempotentWrite), !idempotent},
			"produce timeout": {cl.OptValue(kgo.ProduceRequestTimeout), 10 * time.Second},
			"client id":       {cl.OptValue(kgo.ClientID), "inlet-loadgen-3"},
			"topic":           {cl.OptValue(kgo.DefaultProduceTopic), DefaultTopic},
			"partitioner":     {reflect.TypeOf(cl.OptValue(kgo.RecordPartitioner)), reflect.TypeOf(kgo.UniformBytesPartitioner(64<<10, true, true, nil))},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("idempotent %v: %s = %v, want %v", idempotent, name, c.got, c.want)
			}
		}
		if !idempotent {
			if got := cl.OptValue(kgo.MaxProduceRequestsInflightPerBroker); got != plainMaxInFlight {
				t.Errorf("plain max in flight %v, want %d", got, plainMaxInFlight)
			}
		}
	}
}

func TestSettingsWriteNamesEveryKgoSetting(t *testing.T) {
	s, err := Config{Idempotent: true, Rate: 1000, Duration: time.Minute}.Settings()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"idempotent             true", "acks                   all",
		"max in flight/broker   5", "linger                 5ms", "batch max bytes        1000012",
		"compression            none", "max buffered records   100000 per producer",
		"partitioner            uniform", "1000 records/s (open loop)", "after 1m0s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("settings output lacks %q:\n%s", want, b.String())
		}
	}
}

func TestValueFormatSettings(t *testing.T) {
	s, err := Config{ValueFormat: "AVRO"}.Settings()
	if err != nil || s.ValueFormat != FormatAvro || s.SchemaID != DefaultSchemaID {
		t.Fatalf("avro defaults: %+v, %v", s, err)
	}
	if s, err := (Config{ValueFormat: FormatAvro, SchemaID: 42, RecordSize: AvroMinRecordSize}).Settings(); err != nil || s.SchemaID != 42 {
		t.Fatalf("avro with schema id 42 at the minimum size: %+v, %v", s, err)
	}
	// A schema id means nothing for raw values and is not reported for them.
	if s, err := (Config{SchemaID: 42}).Settings(); err != nil || s.ValueFormat != FormatRaw || s.SchemaID != 0 {
		t.Fatalf("raw with a schema id: %+v, %v", s, err)
	}
	var b strings.Builder
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	if want := "value format           avro (Confluent wire format, schema id 1"; !strings.Contains(b.String(), want) {
		t.Errorf("settings output lacks %q:\n%s", want, b.String())
	}
}

// Topics 0 and 1 are today's single topic, unchanged in the settings and their printout;
// several topics are named in order and cannot be verified.
func TestSeveralTopics(t *testing.T) {
	for _, n := range []int{0, 1} {
		c := Config{Topic: "bench", Topics: n}
		s, err := c.Settings()
		if err != nil || s.Topics != 0 || len(c.TopicNames()) != 1 || c.TopicNames()[0] != "bench" {
			t.Fatalf("topics %d: settings topics %d, names %v, %v", n, s.Topics, c.TopicNames(), err)
		}
		var b strings.Builder
		_ = s.Write(&b)
		if !strings.HasPrefix(b.String(), `loadgen: 16 producers (one kgo client each), topic "bench", 16 partitions, brokers`) {
			t.Errorf("single-topic line changed: %s", b.String())
		}
	}
	c := Config{Topic: "bench", Topics: 1000, Partitions: 1}
	names := c.TopicNames()
	if len(names) != 1000 || names[0] != "bench-0000" || names[999] != "bench-0999" {
		t.Fatalf("names %v ... %v", names[0], names[len(names)-1])
	}
	s, err := c.Settings()
	if err != nil || s.Topics != 1000 {
		t.Fatalf("settings %+v, %v", s, err)
	}
	var b strings.Builder
	_ = s.Write(&b)
	if want := `1000 topics "bench-0000".."bench-0999", 1 partitions each`; !strings.Contains(b.String(), want) {
		t.Errorf("printout lacks %q:\n%s", want, b.String())
	}
	if _, err := (Config{Topics: 2, Verify: true}).Settings(); err == nil || !strings.Contains(err.Error(), "single topic") {
		t.Errorf("verify over two topics: %v", err)
	}
	if _, err := (Config{Topics: -1}).Settings(); err == nil {
		t.Error("negative topics accepted")
	}
}

// TestPerProducerPartitionerPinsEachProducer: producer i's records all go to partition i mod
// the partition count, whatever the record, and the name is accepted in any case.
func TestPerProducerPartitionerPinsEachProducer(t *testing.T) {
	for _, tc := range []struct{ index, n, want int }{{0, 16, 0}, {3, 16, 3}, {15, 16, 15}, {16, 16, 0}, {19, 16, 3}, {5, 1, 0}, {4, 3, 1}} {
		part, err := partitioner(PerProducerPartitioner, tc.index)
		if err != nil {
			t.Fatal(err)
		}
		tp := part.ForTopic("t")
		for _, r := range []*kgo.Record{{}, {Key: []byte("k")}, {Partition: 7}} {
			if got := tp.Partition(r, tc.n); got != tc.want {
				t.Errorf("producer %d of %d partitions: partition %d, want %d", tc.index, tc.n, got, tc.want)
			}
			if !tp.RequiresConsistency(r) {
				t.Errorf("producer %d: a record may move to another partition", tc.index)
			}
		}
	}
	if s, err := (Config{Partitioner: "Per-Producer"}).Settings(); err != nil || s.Partitioner != PerProducerPartitioner {
		t.Fatalf("settings %+v, %v", s, err)
	}
}

// TestPerProducerRunAgainstKfake runs 5 idempotent producers with the per-producer
// partitioner into 3 partitions of franz-go's kfake and reads every record back: each carries
// (in its value) a producer index that maps to its partition, so partitions 0 and 1 hold two
// producers' records and partition 2 one producer's.
func TestPerProducerRunAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const producers, partitions, records = 5, 3, 1500
	res, err := Run(ctx, Config{Brokers: c.ListenAddrs(), Topic: "pinned", Partitions: partitions, Producers: producers,
		Idempotent: true, Records: records, Partitioner: PerProducerPartitioner, FlushTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked != records || res.Failed != 0 {
		t.Fatalf("acked %d failed %d", res.Acked, res.Failed)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("pinned"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dec := NewValueDecoder(DefaultRecordSize)
	perPartition := map[int32]int{}
	for n := 0; n < records; {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", n, records, err)
		}
		fetches.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			perPartition[r.Partition]++
			producer, _, err := dec.Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if int32(producer)%partitions != r.Partition {
				t.Fatalf("producer %d's record in partition %d", producer, r.Partition)
			}
		})
	}
	if want := map[int32]int{0: 600, 1: 600, 2: 300}; !reflect.DeepEqual(perPartition, want) {
		t.Errorf("records per partition %v, want %v", perPartition, want)
	}
}
