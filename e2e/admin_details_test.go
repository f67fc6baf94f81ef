package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Admin answers that tools rely on, as Kafka gives them.

// TestScramCredentialsWithoutSASLUsers: on a node without SASL users, as on any Kafka
// broker, DescribeUserScramCredentials answers (nothing, at first) and an upsertion is
// stored: it is described after, and after a restart; deleting it removes it, and deleting
// again is RESOURCE_NOT_FOUND.
func TestScramCredentialsWithoutSASLUsers(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(newKgo(t, b.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(described) != 0 {
		t.Fatalf("describe every user: %v %v, want none and no error", described, err)
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"}})
	if err != nil || altered["carol"].Err != nil {
		t.Fatalf("upsert carol: %v %+v", err, altered)
	}
	check := func(when string) {
		t.Helper()
		described, err := adm.DescribeUserSCRAMs(ctx)
		if err != nil || len(described) != 1 || len(described["carol"].CredInfos) != 1 ||
			described["carol"].CredInfos[0].Mechanism != kadm.ScramSha512 || described["carol"].CredInfos[0].Iterations != 8192 {
			t.Fatalf("%s: described %+v, %v; want carol's SCRAM-SHA-512 of 8192 iterations", when, described, err)
		}
	}
	check("after the upsertion")
	b.stop()
	b.start()
	adm = kadm.NewClient(newKgo(t, b.addr))
	check("after a restart")
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || altered["carol"].Err != nil {
		t.Fatalf("delete carol: %v %+v", err, altered)
	}
	if described, err := adm.DescribeUserSCRAMs(ctx); err != nil || len(described) != 0 {
		t.Fatalf("after the deletion: %+v %v, want none", described, err)
	}
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || !errors.Is(altered["carol"].Err, kerr.ResourceNotFound) {
		t.Fatalf("delete carol again: %v %+v, want RESOURCE_NOT_FOUND", err, altered)
	}
}

// TestScramUpsertionTakesAnySaltedPassword: Kafka validates the user, the mechanism and the
// iterations of an upsertion, not the length of its salted password; those rules still hold
// (UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE).
func TestScramUpsertionTakesAnySaltedPassword(t *testing.T) {
	b := startBroker(t, nil)
	cl := newKgo(t, b.addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "short", Mechanism: kadm.ScramSha256, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: []byte("ten bytes!")},
		{User: "long", Mechanism: kadm.ScramSha512, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 100)},
	})
	if err != nil || altered["short"].Err != nil || altered["long"].Err != nil {
		t.Fatalf("salted passwords of 10 and 100 bytes: %v %+v, want both stored", err, altered)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iterations int32) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iterations, []byte("s"), []byte("p")
		req.Upsertions = append(req.Upsertions, u)
	}
	up("few", 1, 4095)
	up("many", 1, 16385)
	up("", 1, 4096)
	up("mech", 3, 4096)
	up("twice", 1, 4096)
	up("twice", 2, 4096)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	unacceptable, dup := kerr.UnacceptableCredential.Code, kerr.DuplicateResource.Code
	want := map[string]int16{"few": unacceptable, "many": unacceptable, "": unacceptable, "mech": kerr.UnsupportedSaslMechanism.Code, "twice": dup}
	got := map[string]int16{}
	for _, r := range resp.Results {
		got[r.User] = r.ErrorCode
	}
	for u, code := range want {
		if got[u] != code {
			t.Errorf("upsertion of %q: error %d, want %d", u, got[u], code)
		}
	}
}

// TestUpdateFeaturesTopLevelErrorEveryVersion: as Kafka's controller, a failed update is the
// request's top-level error in v0 and v1 too, with no per-feature results.
func TestUpdateFeaturesTopLevelErrorEveryVersion(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for v := int16(0); v <= 2; v++ {
		// kgo sends the highest version both sides support: pin it.
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(57, v)
		cl := newKgo(t, b.addr, kgo.MaxVersions(vs))
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel = "transaction.version", 2
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.InvalidUpdateVersion.Code || len(resp.Results) != 0 {
			t.Errorf("v%d: top-level error %d, %d per-feature results; want INVALID_UPDATE_VERSION and none", v, resp.ErrorCode, len(resp.Results))
		}
	}
}

// TestKafka3TopicConfigsAccepted: the topic configs Kafka 4.0 removed, which a 3.x broker
// accepts and clients pinned to 3.x send, are accepted by CreateTopics, AlterConfigs and
// IncrementalAlterConfigs (and ignored), and described back as set.
func TestKafka3TopicConfigsAccepted(t *testing.T) {
	b := startBroker(t, nil)
	cl := newKgo(t, b.addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	created, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"message.format.version": kadm.StringPtr("2.8"), "message.downconversion.enable": kadm.StringPtr("false")}, "old")
	if err != nil || created.Err != nil {
		t.Fatalf("create with 3.x configs: %v %v", err, created.Err)
	}
	legacy, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{
		{Name: "message.format.version", Value: kadm.StringPtr("3.0-IV1")},
		{Name: "message.timestamp.difference.max.ms", Value: kadm.StringPtr("60000")},
		{Name: "compression.zstd.level", Value: kadm.StringPtr("9")},
	}, "old")
	if err != nil || legacy[0].Err != nil {
		t.Fatalf("AlterConfigs with 3.x configs: %v %+v", err, legacy)
	}
	incr, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "message.downconversion.enable", Value: kadm.StringPtr("true")}}, "old")
	if err != nil || incr[0].Err != nil {
		t.Fatalf("IncrementalAlterConfigs with message.downconversion.enable: %v %+v", err, incr)
	}
	got := describeConfigs(t, cl, kmsg.ConfigResourceTypeTopic, "old")
	for name, want := range map[string]string{"message.format.version": "3.0-IV1", "message.timestamp.difference.max.ms": "60000",
		"compression.zstd.level": "9", "message.downconversion.enable": "true"} {
		if c, ok := got[name]; !ok || c.Value == nil || *c.Value != want {
			t.Errorf("%s described as %+v, want %s", name, c, want)
		}
	}
	if bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "message.format.version", Value: kadm.StringPtr("newest")}}, "old"); err != nil || !errors.Is(bad[0].Err, kerr.InvalidConfig) {
		t.Errorf("message.format.version=newest: %v %+v, want INVALID_CONFIG", err, bad)
	}
}

// TestIgnoredDynamicBrokerConfigs: Kafka 3.9's dynamic broker configs that mean nothing on
// this node (thread pools, Kerberos login, ...) are accepted at the broker and cluster
// levels, described back as dynamic, and still type-checked.
func TestIgnoredDynamicBrokerConfigs(t *testing.T) {
	b := startBroker(t, nil)
	cl := newKgo(t, b.addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Name: "background.threads", Value: kadm.StringPtr("4")},
		{Name: "sasl.kerberos.min.time.before.relogin", Value: kadm.StringPtr("30000")},
		{Name: "num.io.threads", Value: kadm.StringPtr("16")},
	}, 1)
	if err != nil || resps[0].Err != nil {
		t.Fatalf("set ignored dynamic configs on broker 1: %v %+v", err, resps)
	}
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "metric.reporters", Value: kadm.StringPtr("")}}); err != nil || resps[0].Err != nil {
		t.Fatalf("set metric.reporters as the cluster default: %v %+v", err, resps)
	}
	got := describeConfigs(t, cl, kmsg.ConfigResourceTypeBroker, "1")
	for name, want := range map[string]string{"background.threads": "4", "sasl.kerberos.min.time.before.relogin": "30000", "num.io.threads": "16"} {
		if c := got[name]; c.Value == nil || *c.Value != want || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || c.ReadOnly {
			t.Errorf("%s described as %v from %v (read-only %v), want %s, dynamic", name, c.Value, c.Source, c.ReadOnly, want)
		}
	}
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "background.threads", Value: kadm.StringPtr("many")}}, 1); err != nil || !errors.Is(resps[0].Err, kerr.InvalidConfig) {
		t.Errorf("background.threads=many: %v %+v, want INVALID_CONFIG", err, resps)
	}
}

// TestTinySegmentBytesRollsEveryBatch: segment.bytes down to Kafka 3.x's 14 bytes is taken
// (Kafka 4.x wants 1 MiB); compaction then rolls a virtual segment after every batch, so
// only the last batch stays uncompacted, as clients' compaction tests expect of tiny
// segments.
func TestTinySegmentBytesRollsEveryBatch(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(newKgo(t, b.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"),
		"segment.bytes": kadm.StringPtr("14"), "min.cleanable.dirty.ratio": kadm.StringPtr("0.01")}, "tiny")
	if err != nil || created.Err != nil {
		t.Fatalf("create with segment.bytes=14: %v %v", err, created.Err)
	}
	if bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: kadm.StringPtr("13")}}, "tiny"); err != nil || !errors.Is(bad[0].Err, kerr.InvalidConfig) {
		t.Errorf("segment.bytes=13: %v %+v, want INVALID_CONFIG", err, bad)
	}
	prod := newKgo(t, b.addr)
	const n = 6
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "tiny", Key: []byte("k"), Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.upkeep.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	cons := newKgo(t, b.addr, kgo.ConsumeTopics("tiny"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var values []string
	for ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		if fs.Empty() {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	if len(values) != 1 || values[0] != string(rune('a'+n-1)) {
		t.Fatalf("read %q after compaction, want only the last value %q", values, string(rune('a'+n-1)))
	}
}
