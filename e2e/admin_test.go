package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func adminCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func strPtr(s string) *string { return &s }

// TestKadmTopicLifecycle guards the admin APIs with franz-go's admin client: create with
// configs, describe the full config set with sources, alter incrementally, grow partitions,
// delete, and reuse the name.
func TestKadmTopicLifecycle(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(newKgo(t, b.addr))
	ctx := adminCtx(t)

	resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"cleanup.policy": strPtr("compact"), "retention.ms": strPtr("3600000")}, "life")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	if resp.NumPartitions != 3 || resp.ReplicationFactor != 1 {
		t.Fatalf("created %d partitions, rf %d", resp.NumPartitions, resp.ReplicationFactor)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "life"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("life", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v %v", err, rc.Err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	for _, want := range []struct {
		key, value string
		source     string
	}{
		{"cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"},
		{"retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"},
		{"retention.bytes", "-1", "DEFAULT_CONFIG"},
		{"max.message.bytes", "1048588", "DEFAULT_CONFIG"},
		{"message.timestamp.type", "CreateTime", "DEFAULT_CONFIG"},
		{"segment.bytes", "1073741824", "DEFAULT_CONFIG"},
		{"min.insync.replicas", "1", "DEFAULT_CONFIG"},
		{"compression.type", "producer", "DEFAULT_CONFIG"},
	} {
		c, ok := got[want.key]
		if !ok {
			t.Errorf("DescribeConfigs lacks %s", want.key)
			continue
		}
		if c.MaybeValue() != want.value || c.Source.String() != want.source {
			t.Errorf("%s = %q (%s), want %q (%s)", want.key, c.MaybeValue(), c.Source, want.value, want.source)
		}
	}
	if syn := got["retention.ms"].Synonyms; len(syn) < 2 || syn[len(syn)-1].Key != "log.retention.hours" {
		t.Errorf("retention.ms synonyms %+v; want the override then log.retention.hours", syn)
	}

	// Incremental alter: set one, delete another back to its default.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: strPtr("1000")},
		{Op: kadm.DeleteConfig, Name: "cleanup.policy"},
	}, "life")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, ar)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "life")
	rc, _ = rcs.On("life", nil)
	for _, c := range rc.Configs {
		switch c.Key {
		case "retention.ms":
			if c.MaybeValue() != "1000" {
				t.Errorf("after alter retention.ms = %s", c.MaybeValue())
			}
		case "cleanup.policy":
			if c.MaybeValue() != "delete" || c.Source.String() != "DEFAULT_CONFIG" {
				t.Errorf("after delete cleanup.policy = %s (%s), want the default", c.MaybeValue(), c.Source)
			}
		}
	}

	// Errors for bad input.
	ar, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strPtr("soon")}}, "life")
	if len(ar) != 1 || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Errorf("alter to an invalid value: %+v, want INVALID_CONFIG", ar)
	}
	ar, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such.config", Value: strPtr("1")}}, "life")
	if len(ar) != 1 || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Errorf("alter an unknown config: %+v, want INVALID_CONFIG", ar)
	}
	ar, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strPtr("1")}}, "missing")
	if len(ar) != 1 || !errors.Is(ar[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("alter an unknown topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", ar)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "missing")
	if rc, _ := rcs.On("missing", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("describe an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", rc.Err)
	}
	for _, bad := range []struct {
		name string
		rf   int16
		cfg  map[string]*string
		want error
	}{
		{strings.Repeat("x", 250), 1, nil, kerr.InvalidTopicException},
		{"bad/name", 1, nil, kerr.InvalidTopicException},
		{"bad name", 1, nil, kerr.InvalidTopicException},
		{"..", 1, nil, kerr.InvalidTopicException},
		{"three-replicas", 3, nil, kerr.InvalidReplicationFactor},
		{"bad-config", 1, map[string]*string{"retention.ms": strPtr("abc")}, kerr.InvalidConfig},
		{"bad-policy", 1, map[string]*string{"cleanup.policy": strPtr("shred")}, kerr.InvalidConfig},
	} {
		if _, err := adm.CreateTopic(ctx, 1, bad.rf, bad.cfg, bad.name); !errors.Is(err, bad.want) {
			t.Errorf("create %.20q rf %d: %v, want %v", bad.name, bad.rf, err, bad.want)
		}
	}
	// Kafka's collision rule: '.' and '_' collide in metric names.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "a.b"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "a_b"); !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("create a_b next to a.b: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	// Validate-only creates nothing.
	if _, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "only-validated"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.blog.Topic("only-validated"); ok {
		t.Error("validate-only CreateTopics created the topic")
	}

	// Grow, then delete and reuse the name.
	if cr, err := adm.CreatePartitions(ctx, 2, "life"); err != nil || cr["life"].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, cr)
	}
	if tp, _ := b.blog.Topic("life"); len(tp.Partitions) != 5 {
		t.Fatalf("after CreatePartitions +2 the topic has %d partitions", len(tp.Partitions))
	}
	if cr, _ := adm.UpdatePartitions(ctx, 2, "life"); !errors.Is(cr["life"].Err, kerr.InvalidPartitions) {
		t.Errorf("shrinking: %+v, want INVALID_PARTITIONS", cr)
	}
	produceN(t, b.addr, "life", 10, "old")
	if dr, err := adm.DeleteTopics(ctx, "life"); err != nil || dr["life"].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	if dr, _ := adm.DeleteTopics(ctx, "life"); !errors.Is(dr["life"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("deleting twice: %+v", dr["life"].Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "life"); err != nil {
		t.Fatalf("recreate: %v", err)
	}
	lo, err := adm.ListEndOffsets(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("life", 0); o.Offset != 0 {
		t.Fatalf("recreated topic has end offset %d; the old data survived", o.Offset)
	}

	// The broker's config set and the cluster description.
	brc, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil || len(brc) != 1 || brc[0].Err != nil {
		t.Fatalf("broker configs: %v %+v", err, brc)
	}
	keys := map[string]string{}
	for _, c := range brc[0].Configs {
		keys[c.Key] = c.MaybeValue()
	}
	if keys["log.retention.hours"] != "168" || keys["message.max.bytes"] != "1048588" || keys["log.cleanup.policy"] != "delete" {
		t.Errorf("broker configs lack Kafka's defaults: %v", keys)
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil || len(meta.Brokers) != 1 || meta.Controller != 1 {
		t.Fatalf("cluster: %v %+v", err, meta)
	}
}

// TestKadmDeleteRecordsMovesEarliest guards DeleteRecords and ListOffsets earliest.
func TestKadmDeleteRecordsMovesEarliest(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("dr", 1)
	produceN(t, b.addr, "dr", 20, "x")
	adm := kadm.NewClient(newKgo(t, b.addr))
	ctx := adminCtx(t)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 7})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 7 {
		t.Fatalf("delete records: %+v", r)
	}
	lo, _ := adm.ListStartOffsets(ctx, "dr")
	if o, _ := lo.Lookup("dr", 0); o.Offset != 7 {
		t.Fatalf("earliest offset %d after DeleteRecords to 7", o.Offset)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 99})
	res, _ = adm.DeleteRecords(ctx, os)
	if r, _ := res.Lookup("dr", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past the end: %v, want OFFSET_OUT_OF_RANGE", r.Err)
	}
	// A consumer from the start begins at 7.
	cl := newKgo(t, b.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dr": {0: kgo.NewOffset().AtStart()}}))
	fs := cl.PollFetches(ctx)
	var first int64 = -1
	fs.EachRecord(func(r *kgo.Record) {
		if first < 0 {
			first = r.Offset
		}
	})
	if first != 7 {
		t.Fatalf("consumer from the start read offset %d first, want 7", first)
	}
}

// TestSaramaClusterAdmin guards sarama's ClusterAdmin: create, describe, alter, delete and
// its errors.
func TestSaramaClusterAdmin(t *testing.T) {
	b := startBroker(t, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	adm, err := sarama.NewClusterAdmin([]string{b.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic("sarama-admin", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"max.message.bytes": strPtr("2000")}}, false); err != nil {
		t.Fatal(err)
	}
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "sarama-admin"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e.Name == "max.message.bytes" {
			found = e.Value == "2000" && e.Source == sarama.SourceTopic
		}
	}
	if !found || len(entries) < 20 {
		t.Fatalf("describe: %d entries, max.message.bytes override found %v", len(entries), found)
	}
	if err := adm.AlterConfig(sarama.TopicResource, "sarama-admin", map[string]*string{"retention.ms": strPtr("-1")}, false); err != nil {
		t.Fatal(err)
	}
	if tp, _ := b.blog.Topic("sarama-admin"); tp.Configs["retention.ms"] != "-1" || tp.Configs["max.message.bytes"] != "" {
		// AlterConfigs (not incremental) replaces the whole set of overrides.
		t.Fatalf("configs after AlterConfigs: %v", tp.Configs)
	}
	err = adm.AlterConfig(sarama.TopicResource, "sarama-admin", map[string]*string{"retention.ms": strPtr("x")}, false)
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		t.Errorf("invalid value: %v", err)
	}
	if err := adm.CreateTopic("sarama admin", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, sarama.ErrInvalidTopic) {
		t.Errorf("invalid name: %v", err)
	}
	if err := adm.CreateTopic(strings.Repeat("y", 250), &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, sarama.ErrInvalidTopic) {
		t.Errorf("too-long name: %v", err)
	}
	if err := adm.DeleteTopic("nope"); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Errorf("delete unknown: %v", err)
	}
	if err := adm.DeleteTopic("sarama-admin"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.blog.Topic("sarama-admin"); ok {
		t.Fatal("topic still exists after DeleteTopic")
	}
}

// TestTopicConfigsTakeEffect guards the configs the produce path and retention act on:
// max.message.bytes per topic, LogAppendTime, and retention.ms moving the earliest offset.
func TestTopicConfigsTakeEffect(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(newKgo(t, b.addr))
	ctx := adminCtx(t)
	mk := func(name string, cfg map[string]*string) {
		if _, err := adm.CreateTopic(ctx, 1, 1, cfg, name); err != nil {
			t.Fatal(err)
		}
	}
	mk("small", map[string]*string{"max.message.bytes": strPtr("1000")})
	mk("lat", map[string]*string{"message.timestamp.type": strPtr("LogAppendTime")})
	mk("short", map[string]*string{"retention.ms": strPtr("60000")})

	cl := newKgo(t, b.addr, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(0))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: make([]byte, 5000)}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("5000 bytes to a topic with max.message.bytes=1000: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: make([]byte, 100)}).FirstErr(); err != nil {
		t.Errorf("100 bytes: %v", err)
	}

	old := time.Now().Add(-time.Hour)
	// The produce response carries the append time (kgo does not surface it: raw request).
	rc := dialRaw(t, b.addr)
	p := rc.produceOne(8, "lat", 0, plainBatch(1, old.UnixMilli(), "lat").encode())
	if p.ErrorCode != 0 || time.Since(time.UnixMilli(p.LogAppendTime)) > time.Minute {
		t.Errorf("produce to a LogAppendTime topic: error %d, LogAppendTime %d, want about now", p.ErrorCode, p.LogAppendTime)
	}
	cons := newKgo(t, b.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"lat": {0: kgo.NewOffset().AtStart()}}))
	fs := cons.PollFetches(ctx)
	fs.EachRecord(func(rec *kgo.Record) {
		if time.Since(rec.Timestamp) > time.Minute || rec.Attrs.TimestampType() != 1 {
			t.Errorf("fetched LogAppendTime record has timestamp %v type %d", rec.Timestamp, rec.Attrs.TimestampType())
		}
	})
	if fs.NumRecords() != 1 {
		t.Errorf("fetched %d records from lat (errors %v)", fs.NumRecords(), fs.Errors())
	}

	// Retention: three batches an hour old, then two fresh ones; retention.ms=60s drops the
	// old ones.
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "short", Value: []byte("old"), Timestamp: old}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "short", Value: []byte("new")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.upkeep.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	lo, _ := adm.ListStartOffsets(ctx, "short")
	if o, _ := lo.Lookup("short", 0); o.Offset != 3 {
		t.Fatalf("earliest offset after retention is %d, want 3", o.Offset)
	}
	b.restart()
	adm = kadm.NewClient(newKgo(t, b.addr))
	lo, _ = adm.ListStartOffsets(ctx, "short")
	if o, _ := lo.Lookup("short", 0); o.Offset != 3 {
		t.Fatalf("earliest offset after a restart is %d, want 3", o.Offset)
	}
}
