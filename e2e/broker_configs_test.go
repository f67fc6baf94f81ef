package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeConfigs asks for one resource's configs with synonyms and documentation.
func describeConfigs(t *testing.T, cl *kgo.Client, typ kmsg.ConfigResourceType, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("describe configs %q: %v", name, err)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// TestDynamicBrokerConfigs: broker configs carry Kafka's documentation and types; the
// dynamic ones (retention defaults, log.cleaner.*) change through IncrementalAlterConfigs at
// this broker's level and the cluster default's, become the defaults of topics without an
// override (described with their sources, and acted on), survive a restart, and are seen by
// sarama's admin client too; static ones and unknown names are refused.
func TestDynamicBrokerConfigs(t *testing.T) {
	b := startBroker(t, nil)
	cl := newKgo(t, b.addr)
	adm := kadm.NewClient(cl)
	b.createTopic("plain", 1)
	if _, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1000")}}, "plain"); err != nil {
		t.Fatal(err)
	}
	b.createTopic("follows", 1)

	brokerCfg := describeConfigs(t, cl, kmsg.ConfigResourceTypeBroker, "1")
	for name, c := range brokerCfg {
		if c.Documentation == nil || *c.Documentation == "" {
			t.Errorf("broker config %s has no documentation", name)
		}
		if c.ConfigType == 0 {
			t.Errorf("broker config %s has no type", name)
		}
	}
	if c := brokerCfg["log.cleaner.backoff.ms"]; c.Value == nil || *c.Value != "15000" || c.ReadOnly || c.ConfigType != kmsg.ConfigTypeLong {
		t.Errorf("log.cleaner.backoff.ms: %+v, want 15000, LONG, dynamic", c)
	}
	if c := brokerCfg["broker.id"]; !c.ReadOnly {
		t.Error("broker.id is not read-only")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The cluster default, then this broker's own, which takes precedence.
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.hours", Value: kadm.StringPtr("2")}, {Name: "log.cleaner.backoff.ms", Value: kadm.StringPtr("30000")}}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, wantMs string, wantSource kmsg.ConfigSource) {
		t.Helper()
		c := describeConfigs(t, cl, kmsg.ConfigResourceTypeTopic, "follows")["retention.ms"]
		if c.Value == nil || *c.Value != wantMs || c.Source != wantSource {
			t.Errorf("%s: follows' retention.ms %v from %v, want %s from %v", when, c.Value, c.Source, wantMs, wantSource)
		}
		if c := describeConfigs(t, cl, kmsg.ConfigResourceTypeTopic, "plain")["retention.ms"]; *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s: plain's own retention.ms %v from %v, want its override", when, *c.Value, c.Source)
		}
		tp, _ := b.blog.Topic("follows")
		if ms, _ := time.ParseDuration(wantMs + "ms"); tp.Settings.RetentionMs != ms.Milliseconds() {
			t.Errorf("%s: the log keeps follows for %d ms, want %s", when, tp.Settings.RetentionMs, wantMs)
		}
	}
	check("cluster default hours", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("3600000")}}, 1); err != nil {
		t.Fatal(err)
	}
	check("this broker's ms", "3600000", kmsg.ConfigSourceDynamicBrokerConfig)
	if c := describeConfigs(t, cl, kmsg.ConfigResourceTypeBroker, "")["log.cleaner.backoff.ms"]; c.Value == nil || *c.Value != "30000" {
		t.Errorf("cluster default log.cleaner.backoff.ms %v, want 30000", c.Value)
	}

	// Refusals: a static config, an unknown one, a bad value.
	for _, c := range []struct {
		name, value string
		want        error
	}{{"broker.id", "7", kerr.InvalidRequest}, {"log.no.such.thing", "1", kerr.InvalidConfig}, {"log.retention.ms", "soon", kerr.InvalidConfig}} {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: c.name, Value: kadm.StringPtr(c.value)}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(resps[0].Err, c.want) {
			t.Errorf("setting %s=%s: %v, want %v", c.name, c.value, resps[0].Err, c.want)
		}
	}

	// Durable.
	b.restart()
	cl = newKgo(t, b.addr)
	check("after a restart", "3600000", kmsg.ConfigSourceDynamicBrokerConfig)
	if c := describeConfigs(t, cl, kmsg.ConfigResourceTypeBroker, "1")["log.cleaner.backoff.ms"]; c.Value == nil || *c.Value != "30000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("after a restart: log.cleaner.backoff.ms %v from %v, want 30000 from the cluster default", c.Value, c.Source)
	}

	// sarama sees the same, and deleting this broker's setting brings the default back.
	scfg := sarama.NewConfig()
	scfg.Version = sarama.V3_6_0_0
	sadm, err := sarama.NewClusterAdmin([]string{b.addr}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sadm.Close()
	entries, err := sadm.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "1", ConfigNames: []string{"log.retention.ms"}})
	if err != nil || len(entries) != 1 || entries[0].Value != "3600000" || entries[0].Source != sarama.SourceDynamicBroker {
		t.Fatalf("sarama: log.retention.ms %+v %v, want 3600000 from the dynamic broker config", entries, err)
	}
	if err := sadm.IncrementalAlterConfig(sarama.BrokerResource, "1", map[string]sarama.IncrementalAlterConfigsEntry{"log.retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationDelete}}, false); err != nil {
		t.Fatal(err)
	}
	check("this broker's deleted", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// As in Kafka, the most specific name wins before the most specific level: the cluster
	// default's log.retention.ms over this broker's log.retention.hours.
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("600000")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.hours", Value: kadm.StringPtr("48")}}, 1); err != nil {
		t.Fatal(err)
	}
	check("ms at the cluster default, hours at this broker", "600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	// A negative number of hours is no limit, as Kafka reads it.
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Op: kadm.DeleteConfig}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.hours", Value: kadm.StringPtr("-1")}}, 1); err != nil {
		t.Fatal(err)
	}
	check("hours -1", "-1", kmsg.ConfigSourceDynamicBrokerConfig)
}
