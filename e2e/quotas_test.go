package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/conn"
	"inlet/quota"
	"inlet/server"
)

// quotasOf is every quota kadm describes, as "entity key" -> value.
func quotasOf(t *testing.T, adm *kadm.Client, comps ...kadm.DescribeClientQuotaComponent) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if comps == nil {
		comps = []kadm.DescribeClientQuotaComponent{}
	}
	qs, err := adm.DescribeClientQuotas(ctx, false, comps)
	if err != nil {
		t.Fatalf("describe client quotas: %v", err)
	}
	out := map[string]float64{}
	for _, q := range qs {
		name := "<default>"
		if len(q.Entity) == 1 && q.Entity[0].Name != nil {
			name = *q.Entity[0].Name
		}
		for _, v := range q.Values {
			out[q.Entity[0].Type+"="+name+" "+v.Key] = v.Value
		}
	}
	return out
}

func alterQuota(t *testing.T, adm *kadm.Client, user *string, key string, v float64, remove bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: key, Value: v, Remove: remove}},
	}})
	if err != nil {
		t.Fatalf("alter client quotas: %v", err)
	}
	return res[0].Err
}

// TestClientQuotasAtRunTime: AlterClientQuotas sets and removes user and default quotas,
// DescribeClientQuotas shows them to kadm and to sarama's ClusterAdmin with Kafka's filters,
// only super users may change them, keys this node does not enforce are refused, and the
// quotas survive a restart on top of the config file's.
func TestClientQuotasAtRunTime(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.Users = tenantUsers(t)
		c.SuperUsers = []string{"admin"}
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
		c.Quotas = quota.Bounds{"bob": {quota.ConsumerByteRate: 4096}}
	})
	adm := kadm.NewClient(saslClient(t, b, "admin", "admin-secret"))
	if err := alterQuota(t, adm, strPtr("alice"), quota.ProducerByteRate, 1<<20, false); err != nil {
		t.Fatal(err)
	}
	if err := alterQuota(t, adm, nil, quota.ConsumerByteRate, 2<<20, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"user=alice producer_byte_rate":     1 << 20,
		"user=<default> consumer_byte_rate": 2 << 20,
		"user=bob consumer_byte_rate":       4096,
	}
	if got := quotasOf(t, adm); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("quotas %v, want %v", got, want)
	}
	if got := quotasOf(t, adm, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: strPtr("alice"), MatchType: 0}); len(got) != 1 || got["user=alice producer_byte_rate"] != 1<<20 {
		t.Fatalf("exact match of alice: %v", got)
	}
	if got := quotasOf(t, adm, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}); len(got) != 1 || got["user=<default> consumer_byte_rate"] != 2<<20 {
		t.Fatalf("default match: %v", got)
	}
	if got := quotasOf(t, adm, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}); len(got) != 0 {
		t.Fatalf("client-id quotas: %v, want none", got)
	}

	// sarama's admin client sees the same, and removes one.
	sadm := saramaAdmin(t, b)
	entries, err := sadm.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchAny}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Entity[0].Name != "alice" || entries[0].Values[quota.ProducerByteRate] != 1<<20 {
		t.Fatalf("sarama: named users' quotas %+v", entries)
	}
	if err := sadm.AlterClientQuotas([]sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityUser, MatchType: sarama.QuotaMatchExact, Name: "bob"}},
		sarama.ClientQuotasOp{Key: quota.ConsumerByteRate, Remove: true}, false); err != nil {
		t.Fatal(err)
	}
	delete(want, "user=bob consumer_byte_rate")

	// Refusals.
	if err := alterQuota(t, adm, strPtr("alice"), "request_percentage", 50, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("request_percentage: %v, want INVALID_REQUEST", err)
	}
	if err := alterQuota(t, adm, strPtr("alice"), quota.ProducerByteRate, 0.5, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("a rate of 0.5: %v, want INVALID_REQUEST", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: strPtr("127.0.0.1")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 100}},
	}})
	if err != nil || !errors.Is(res[0].Err, kerr.InvalidRequest) {
		t.Fatalf("ip quota: %v %v, want INVALID_REQUEST", err, res)
	}
	alice := kadm.NewClient(saslClient(t, b, "alice", "alice-secret"))
	if err := alterQuota(t, alice, strPtr("alice"), quota.ProducerByteRate, 1<<30, false); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice raising her own quota: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if _, err := alice.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice describing quotas: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	// Durable, on top of the file's (bob's removal included).
	restartTenants(t, b)
	adm = kadm.NewClient(saslClient(t, b, "admin", "admin-secret"))
	if got := quotasOf(t, adm); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a restart: quotas %v, want %v", got, want)
	}
}

// throttles counts the throttles a client is told of.
type throttles struct{ n atomic.Int64 }

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestProducerByteRateHoldsFourProducers: with producer_byte_rate set for alice, four
// producers of alice together stay within the quota (±10% over 10 s, after the first
// second's burst) and are told of throttles; bob, producing at the same time without a
// quota, is neither slowed to it nor throttled.
func TestProducerByteRateHoldsFourProducers(t *testing.T) {
	if testing.Short() {
		t.Skip("13 s of throttled producing")
	}
	const rate = 256 << 10
	b := startBroker(t, func(c *server.Config) {
		c.Users = tenantUsers(t)
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
		c.Quotas = quota.Bounds{"alice": {quota.ProducerByteRate: rate}}
	})
	b.createTopic("alice.q", 4)
	b.createTopic("bob.q", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	const warmup, measure = 2 * time.Second, 10 * time.Second
	start := time.Now()
	var mu sync.Mutex
	acked := map[string]int{} // user -> value bytes acknowledged inside the measured 10 s
	value := make([]byte, 1000)
	_, _ = rand.Read(value)
	var wg sync.WaitGroup
	var aliceThrottles, bobThrottles throttles
	producer := func(user string, partition int32, h *throttles) {
		defer wg.Done()
		// Uncompressed, so that the bytes counted are the values' (a quota counts request
		// bytes, compressed or not).
		cl := saslClient(t, b, user, user+"-secret", kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(32), kgo.WithHooks(h))
		topic := user + ".q"
		for time.Since(start) < warmup+measure {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: value}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				if at := time.Since(start); at >= warmup && at < warmup+measure {
					mu.Lock()
					acked[user] += len(r.Value)
					mu.Unlock()
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Error(err)
		}
	}
	for p := int32(0); p < 4; p++ {
		wg.Add(1)
		go producer("alice", p, &aliceThrottles)
	}
	wg.Add(1)
	go producer("bob", 0, &bobThrottles)
	wg.Wait()

	aliceRate := float64(acked["alice"]) / measure.Seconds()
	bobRate := float64(acked["bob"]) / measure.Seconds()
	t.Logf("alice (4 producers, quota %d B/s): %.0f B/s of values, %d throttles; bob (no quota): %.0f B/s, %d throttles",
		rate, aliceRate, aliceThrottles.n.Load(), bobRate, bobThrottles.n.Load())
	// Requests carry about 2% more than their values (record and batch headers).
	if aliceRate < 0.9*rate/1.02 || aliceRate > 1.1*rate {
		t.Errorf("alice's four producers: %.0f B/s, want %d ±10%%", aliceRate, rate)
	}
	if aliceThrottles.n.Load() == 0 {
		t.Error("alice's producers were never told of a throttle")
	}
	if bobThrottles.n.Load() != 0 || bobRate < 2*rate {
		t.Errorf("bob: %.0f B/s and %d throttles; want unthrottled, well over alice's quota", bobRate, bobThrottles.n.Load())
	}
}

// TestConsumerByteRateThrottlesFetch: with consumer_byte_rate set as the default, a consumer
// reading 1.5 MiB at 256 KiB/s takes as long as the quota says (less the one-second burst
// and the last answer), and is told of throttles.
func TestConsumerByteRateThrottlesFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("5 s of throttled consuming")
	}
	const rate = 256 << 10
	b := startBroker(t, func(c *server.Config) {
		c.Quotas = quota.Bounds{quota.DefaultUser: {quota.ConsumerByteRate: rate}}
	})
	b.createTopic("q", 1)
	recs := makeRecords(1500, 1, "quota")
	for _, r := range recs {
		r.value = make([]byte, 1000)
		_, _ = rand.Read(r.value)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Small batches, so that no answer is much larger than FetchMaxPartitionBytes.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	kgoProduce(ctx, t, cl, "q", recs)
	cl.Close()

	var h throttles
	began := time.Now()
	got := kgoConsume(ctx, t, b.addr, "q", 1, len(recs), kgo.FetchMaxPartitionBytes(64<<10), kgo.WithHooks(&h))
	took := time.Since(began)
	total := 1500 * 1000
	floor := time.Duration(float64(total-rate-64<<10) / rate * float64(time.Second))
	t.Logf("%d records (%d KiB) in %v at consumer_byte_rate %d KiB/s (at least %v), %d throttles", len(got), total>>10, took, rate>>10, floor, h.n.Load())
	if took < floor*9/10 {
		t.Errorf("read in %v, faster than the quota allows (%v)", took, floor)
	}
	if h.n.Load() == 0 {
		t.Error("the consumer was never told of a throttle")
	}
}

// disconnects counts a client's broker disconnections.
type disconnects struct{ n atomic.Int64 }

func (h *disconnects) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.n.Add(1) }

// TestSendingWhileThrottledIsClosed: an acks=0 producer gets no answers, so nothing tells it
// of its throttle and it keeps sending; the node cannot stop reading it, as Kafka does, so
// once its requests queued behind the mute hold more than a quarter of the in-flight budget
// (here 8 MiB) its connection is closed. A producer of another user is not held up meanwhile.
func TestSendingWhileThrottledIsClosed(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.Users = tenantUsers(t)
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
		c.Quotas = quota.Bounds{"alice": {quota.ProducerByteRate: 1024}}
		c.InflightBudget = 8 << 20
	})
	b.createTopic("alice.q", 1)
	b.createTopic("bob.q", 1)
	var h disconnects
	cl := saslClient(t, b, "alice", "alice-secret", kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(64<<10), kgo.WithHooks(&h))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := make([]byte, 1000)
	sendUntil := time.Now().Add(15 * time.Second)
	for h.n.Load() == 0 && time.Now().Before(sendUntil) {
		cl.Produce(ctx, &kgo.Record{Topic: "alice.q", Value: value}, nil)
		time.Sleep(100 * time.Microsecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if h.n.Load() == 0 {
		t.Fatal("an acks=0 producer sending while throttled was never disconnected")
	}
	bob := saslClient(t, b, "bob", "bob-secret")
	began := time.Now()
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "bob.q", Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("bob's produce took %v while alice was throttled", took)
	}
}

// TestThrottledFetchOfADeniedTopic: a fetch that arrives while its user is over the
// consumer_byte_rate is answered empty at once, and the topics outside the user's prefixes in
// it are still answered TOPIC_AUTHORIZATION_FAILED (that answer is built on a different
// response than a served fetch's; it took the node down before).
func TestThrottledFetchOfADeniedTopic(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.Users = tenantUsers(t)
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
		c.Quotas = quota.Bounds{"alice": {quota.ConsumerByteRate: 1024}}
	})
	b.createTopic("alice.q", 1)
	b.createTopic("bob.q", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := saslClient(t, b, "alice", "alice-secret")
	value := make([]byte, 100000) // past the burst Kafka's quota windows allow
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "alice.q", Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The second fetch goes on another connection of the same user: the first connection is
	// muted for its throttle, so only another one reaches the handler while the user is over.
	other := saslClient(t, b, "alice", "alice-secret")
	fetch := func(cl *kgo.Client) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes = 11, 0, 1<<20
		for _, topic := range []string{"alice.q", "bob.q"} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	codes := func(resp *kmsg.FetchResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[rt.Topic] = rp.ErrorCode
			}
		}
		return out
	}
	first := fetch(cl) // 100 KB read at 1 KiB/s: the user is over its quota for a minute
	if c := codes(first); c["alice.q"] != 0 || c["bob.q"] != kerr.TopicAuthorizationFailed.Code || len(first.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("first fetch: codes %v, %d record bytes", c, len(first.Topics[0].Partitions[0].RecordBatches))
	}
	second := fetch(other)
	if second.ThrottleMillis == 0 {
		t.Fatal("the second fetch was not throttled")
	}
	if c := codes(second); c["bob.q"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("throttled fetch: codes %v, want bob.q TOPIC_AUTHORIZATION_FAILED", c)
	}
}
