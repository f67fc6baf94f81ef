package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/conn"
	"inlet/quota"
	"inlet/server"
)

// Quotas at every level of KIP-55: client-id entities, (user, client-id) pairs and their
// defaults, through the admin APIs and measured end to end.

// entityQuotas is every quota kadm describes for a filter, as "user=U,client-id=C key" ->
// value (a default shown as <default>).
func entityQuotas(t *testing.T, adm *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if comps == nil {
		comps = []kadm.DescribeClientQuotaComponent{}
	}
	qs, err := adm.DescribeClientQuotas(ctx, strict, comps)
	if err != nil {
		t.Fatalf("describe client quotas: %v", err)
	}
	out := map[string]float64{}
	for _, q := range qs {
		var parts []string
		for _, e := range q.Entity {
			name := "<default>"
			if e.Name != nil {
				name = *e.Name
			}
			parts = append(parts, e.Type+"="+name)
		}
		sort.Strings(parts)
		for _, v := range q.Values {
			out[strings.Join(parts, ",")+" "+v.Key] = v.Value
		}
	}
	return out
}

func alterEntityQuota(t *testing.T, adm *kadm.Client, ent kadm.ClientQuotaEntity, key string, v float64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}})
	if err != nil {
		t.Fatalf("alter client quotas: %v", err)
	}
	return res[0].Err
}

// TestClientQuotaEntitiesAtRunTime: AlterClientQuotas sets quotas of client-id entities,
// (user, client-id) pairs and their defaults; DescribeClientQuotas shows them with Kafka's
// filters (exact, default, any specified name; strict); Kafka's entity checks and the keys
// this node does not enforce are refused; and they survive a restart.
func TestClientQuotaEntitiesAtRunTime(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(newKgo(t, b.addr))
	user := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "user", Name: n}
	}
	client := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "client-id", Name: n}
	}
	for _, c := range []struct {
		ent kadm.ClientQuotaEntity
		key string
		v   float64
	}{
		{kadm.ClientQuotaEntity{client(strPtr("etl"))}, quota.ProducerByteRate, 1000},
		{kadm.ClientQuotaEntity{client(nil)}, quota.ProducerByteRate, 2000},
		{kadm.ClientQuotaEntity{user(strPtr("alice")), client(strPtr("etl"))}, quota.ConsumerByteRate, 3000},
		{kadm.ClientQuotaEntity{user(strPtr("alice")), client(nil)}, quota.ProducerByteRate, 4000},
		{kadm.ClientQuotaEntity{user(nil), client(nil)}, quota.ProducerByteRate, 5000},
		{kadm.ClientQuotaEntity{user(strPtr("alice"))}, quota.ProducerByteRate, 6000},
	} {
		if err := alterEntityQuota(t, adm, c.ent, c.key, c.v); err != nil {
			t.Fatalf("set %v %s: %v", c.ent, c.key, err)
		}
	}
	all := map[string]float64{
		"client-id=etl producer_byte_rate":                      1000,
		"client-id=<default> producer_byte_rate":                2000,
		"client-id=etl,user=alice consumer_byte_rate":           3000,
		"client-id=<default>,user=alice producer_byte_rate":     4000,
		"client-id=<default>,user=<default> producer_byte_rate": 5000,
		"user=alice producer_byte_rate":                         6000,
	}
	check := func(when string) {
		t.Helper()
		if got := entityQuotas(t, adm, false); fmt.Sprint(got) != fmt.Sprint(all) {
			t.Fatalf("%s: quotas %v, want %v", when, got, all)
		}
	}
	check("after setting")
	for _, c := range []struct {
		name   string
		strict bool
		comps  []kadm.DescribeClientQuotaComponent
		want   []string
	}{
		{"client-id etl", false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: strPtr("etl"), MatchType: 0}},
			[]string{"client-id=etl producer_byte_rate", "client-id=etl,user=alice consumer_byte_rate"}},
		{"client-id etl, strict", true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: strPtr("etl"), MatchType: 0}},
			[]string{"client-id=etl producer_byte_rate"}},
		{"default client-id of alice", false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strPtr("alice"), MatchType: 0}, {Type: "client-id", MatchType: 1}},
			[]string{"client-id=<default>,user=alice producer_byte_rate"}},
		{"any named client-id", false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 2}},
			[]string{"client-id=etl producer_byte_rate", "client-id=etl,user=alice consumer_byte_rate"}},
		{"users alone, strict", true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}},
			[]string{"user=alice producer_byte_rate"}},
	} {
		got := entityQuotas(t, adm, c.strict, c.comps...)
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sort.Strings(c.want)
		if fmt.Sprint(keys) != fmt.Sprint(c.want) {
			t.Errorf("filter %s: %v, want %v", c.name, keys, c.want)
		}
	}

	// Refusals, as Kafka's ClientQuotaControlManager gives them, and request_percentage.
	for _, c := range []struct {
		name string
		ent  kadm.ClientQuotaEntity
		key  string
		msg  string
	}{
		{"empty client id", kadm.ClientQuotaEntity{client(strPtr(""))}, quota.ProducerByteRate, "Empty client-id not supported"},
		{"client-id twice", kadm.ClientQuotaEntity{client(strPtr("a")), client(strPtr("b"))}, quota.ProducerByteRate, "duplicate entity entry"},
		{"empty entity", kadm.ClientQuotaEntity{}, quota.ProducerByteRate, "empty client quota entity"},
		{"request_percentage", kadm.ClientQuotaEntity{client(strPtr("etl"))}, "request_percentage", "request handler threads"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: c.ent, Ops: []kadm.AlterClientQuotaOp{{Key: c.key, Value: 50}}}})
		cancel()
		if err != nil || !errors.Is(res[0].Err, kerr.InvalidRequest) || !strings.Contains(res[0].ErrMessage, c.msg) {
			t.Errorf("%s: %v %+v, want INVALID_REQUEST saying %q", c.name, err, res, c.msg)
		}
	}

	b.stop()
	b.start()
	adm = kadm.NewClient(newKgo(t, b.addr))
	check("after a restart")
}

// producerGroup is producers of one principal and client id, measured together.
type producerGroup struct {
	name     string
	n        int    // producers
	topic    string // partitions 0..n-1
	client   func(opts ...kgo.Opt) *kgo.Client
	throttle throttles
	acked    int // value bytes acknowledged inside the measured window
}

// measureProducers runs every group's producers flat out for warmup+measure and counts the
// value bytes acknowledged within the measured window.
func measureProducers(t *testing.T, groups []*producerGroup, warmup, measure time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), warmup+measure+30*time.Second)
	defer cancel()
	start := time.Now()
	var mu sync.Mutex
	value := make([]byte, 1000)
	_, _ = rand.Read(value)
	var wg sync.WaitGroup
	for _, g := range groups {
		for p := range g.n {
			wg.Add(1)
			go func(g *producerGroup, partition int32) {
				defer wg.Done()
				// Uncompressed, so that the bytes counted are the values' (a quota counts
				// request bytes).
				cl := g.client(kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
					kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(32), kgo.WithHooks(&g.throttle))
				for time.Since(start) < warmup+measure {
					cl.Produce(ctx, &kgo.Record{Topic: g.topic, Partition: partition, Value: value}, func(r *kgo.Record, err error) {
						if err != nil {
							return
						}
						if at := time.Since(start); at >= warmup && at < warmup+measure {
							mu.Lock()
							g.acked += len(r.Value)
							mu.Unlock()
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					t.Error(err)
				}
			}(g, int32(p))
		}
	}
	wg.Wait()
}

// checkCapped: a group held to rate within ±10% over the measured window (requests carry
// about 2% more than their values), and told of throttles.
func checkCapped(t *testing.T, g *producerGroup, rate float64, measure time.Duration) {
	t.Helper()
	got := float64(g.acked) / measure.Seconds()
	t.Logf("%s (%d producers, quota %.0f B/s): %.0f B/s of values, %d throttles", g.name, g.n, rate, got, g.throttle.n.Load())
	if got < 0.9*rate/1.02 || got > 1.1*rate {
		t.Errorf("%s: %.0f B/s, want %.0f ±10%%", g.name, got, rate)
	}
	if g.throttle.n.Load() == 0 {
		t.Errorf("%s was never told of a throttle", g.name)
	}
}

// checkFree: a group with no quota of its own, neither throttled nor slowed to rate.
func checkFree(t *testing.T, g *producerGroup, rate float64, measure time.Duration) {
	t.Helper()
	got := float64(g.acked) / measure.Seconds()
	t.Logf("%s (no quota): %.0f B/s, %d throttles", g.name, got, g.throttle.n.Load())
	if g.throttle.n.Load() != 0 || got < 2*rate {
		t.Errorf("%s: %.0f B/s and %d throttles; want unthrottled, well over %.0f B/s", g.name, got, g.throttle.n.Load(), rate)
	}
}

// TestClientIDQuotaHoldsItsProducers: a producer_byte_rate set at run time for client id
// "capped" (/config/clients/capped) holds its two producers together to the quota (±10% over
// 10 s after a warm-up), whatever their connections; a producer with another client id at
// the same time is not throttled.
func TestClientIDQuotaHoldsItsProducers(t *testing.T) {
	if testing.Short() {
		t.Skip("12 s of throttled producing")
	}
	const rate = 256 << 10
	b := startBroker(t, nil)
	if err := alterEntityQuota(t, kadm.NewClient(newKgo(t, b.addr)), kadm.ClientQuotaEntity{{Type: "client-id", Name: strPtr("capped")}}, quota.ProducerByteRate, rate); err != nil {
		t.Fatal(err)
	}
	b.createTopic("cq", 2)
	b.createTopic("fq", 1)
	plain := func(id string) func(...kgo.Opt) *kgo.Client {
		return func(opts ...kgo.Opt) *kgo.Client { return newKgo(t, b.addr, append(opts, kgo.ClientID(id))...) }
	}
	capped := &producerGroup{name: "client id capped", n: 2, topic: "cq", client: plain("capped")}
	free := &producerGroup{name: "client id free", n: 1, topic: "fq", client: plain("free")}
	const warmup, measure = 2 * time.Second, 10 * time.Second
	measureProducers(t, []*producerGroup{capped, free}, warmup, measure)
	checkCapped(t, capped, rate, measure)
	checkFree(t, free, rate, measure)
}

// TestUserClientIDQuotaHoldsItsProducers: a producer_byte_rate for (alice, etl)
// (/config/users/alice/clients/etl) holds alice's two etl producers to the quota (±10% over
// 10 s); alice with another client id, and bob with client id etl, are not throttled (the
// quota is the pair's). A (<default>, <default>) quota far above would apply to them, each
// pair in its own bucket, and does not slow them to the pair's.
func TestUserClientIDQuotaHoldsItsProducers(t *testing.T) {
	if testing.Short() {
		t.Skip("12 s of throttled producing")
	}
	const rate = 256 << 10
	b := startBroker(t, func(c *server.Config) {
		c.Users = tenantUsers(t)
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
		c.Quotas = quota.Bounds{
			quota.EntityKey("alice", "etl"):                       {quota.ProducerByteRate: rate},
			quota.EntityKey(quota.DefaultUser, quota.DefaultUser): {quota.ProducerByteRate: 1 << 30},
		}
	})
	b.createTopic("alice.etl", 2)
	b.createTopic("alice.other", 1)
	b.createTopic("bob.etl", 1)
	sasl := func(user, id string) func(...kgo.Opt) *kgo.Client {
		return func(opts ...kgo.Opt) *kgo.Client {
			return saslClient(t, b, user, user+"-secret", append(opts, kgo.ClientID(id))...)
		}
	}
	pair := &producerGroup{name: "alice with client id etl", n: 2, topic: "alice.etl", client: sasl("alice", "etl")}
	other := &producerGroup{name: "alice with client id other", n: 1, topic: "alice.other", client: sasl("alice", "other")}
	bob := &producerGroup{name: "bob with client id etl", n: 1, topic: "bob.etl", client: sasl("bob", "etl")}
	const warmup, measure = 2 * time.Second, 10 * time.Second
	measureProducers(t, []*producerGroup{pair, other, bob}, warmup, measure)
	checkCapped(t, pair, rate, measure)
	checkFree(t, other, rate, measure)
	checkFree(t, bob, rate, measure)
}

// TestDefaultClientIDConsumerByteRate: consumer_byte_rate for the default client id
// (/config/clients/<default>) holds each client id to it apart (each its own bucket): two
// consumers with different client ids, reading 2.5 MiB each at the same time at 256 KiB/s,
// each take as long as the quota says for one (less the one-second burst and the last
// answer), not twice that; a consumer whose client id has its own higher quota
// (/config/clients/fast) takes less.
func TestDefaultClientIDConsumerByteRate(t *testing.T) {
	if testing.Short() {
		t.Skip("9 s of throttled consuming")
	}
	const rate = 256 << 10
	b := startBroker(t, func(c *server.Config) {
		c.Quotas = quota.Bounds{
			quota.EntityKey("", quota.DefaultUser): {quota.ConsumerByteRate: rate},
			quota.EntityKey("", "fast"):            {quota.ConsumerByteRate: 8 * rate},
		}
	})
	b.createTopic("q", 1)
	recs := makeRecords(2500, 1, "quota")
	for _, r := range recs {
		r.value = make([]byte, 1000)
		_, _ = rand.Read(r.value)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newKgo(t, b.addr, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10))
	kgoProduce(ctx, t, cl, "q", recs)
	total := len(recs) * 1000
	floor := time.Duration(float64(total-rate-64<<10) / rate * float64(time.Second))
	var wg sync.WaitGroup
	took := map[string]time.Duration{}
	var mu sync.Mutex
	hooks := map[string]*throttles{}
	for _, id := range []string{"one", "two", "fast"} {
		h := &throttles{}
		hooks[id] = h
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			began := time.Now()
			got := kgoConsume(ctx, t, b.addr, "q", 1, len(recs), kgo.FetchMaxPartitionBytes(64<<10), kgo.ClientID(id), kgo.WithHooks(h))
			mu.Lock()
			took[id] = time.Since(began)
			mu.Unlock()
			if len(got) != len(recs) {
				t.Errorf("client id %s read %d records, want %d", id, len(got), len(recs))
			}
		}(id)
	}
	wg.Wait()
	t.Logf("%d KiB each at consumer_byte_rate %d KiB/s (at least %v): one %v (%d throttles), two %v (%d throttles), fast %v",
		total>>10, rate>>10, floor, took["one"], hooks["one"].n.Load(), took["two"], hooks["two"].n.Load(), took["fast"])
	for _, id := range []string{"one", "two"} {
		if took[id] < floor*9/10 {
			t.Errorf("client id %s read in %v, faster than the quota allows (%v)", id, took[id], floor)
		}
		if took[id] > floor*3/2+2*time.Second {
			t.Errorf("client id %s read in %v: slowed as if it shared the default's bucket (one client id's share: %v)", id, took[id], floor)
		}
		if hooks[id].n.Load() == 0 {
			t.Errorf("client id %s was never told of a throttle", id)
		}
	}
	if took["fast"] >= floor/2 {
		t.Errorf("client id fast (8× the quota) read in %v, want well under %v", took["fast"], floor)
	}
}
