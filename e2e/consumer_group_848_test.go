package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// KIP-848 consumer groups end to end: franz-go opted in with kgo.ServerSideBalancer() and
// librdkafka with group.protocol=consumer, against a node whose heartbeat interval is short
// (250 ms instead of Kafka's 5 s) so that a rebalance takes a second, not ten.

func fast848(c *server.Config) { c.ConsumerGroups.HeartbeatInterval = 250 * time.Millisecond }

// seenRecords counts the values consumed by every member of a test, and who got them.
type seenRecords struct {
	mu     sync.Mutex
	counts map[string]int
}

func (s *seenRecords) add(v string) {
	s.mu.Lock()
	s.counts[v]++
	s.mu.Unlock()
}

// waitAll waits until every value tag-0..tag-(n-1) has been consumed at least once.
func (s *seenRecords) waitAll(t *testing.T, tag string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s.mu.Lock()
		missing := 0
		for i := 0; i < n; i++ {
			if s.counts[fmt.Sprintf("%s-%d", tag, i)] == 0 {
				missing++
			}
		}
		s.mu.Unlock()
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %q records never consumed", missing, n, tag)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// member848 is a franz-go consumer in a KIP-848 group, polling in a goroutine.
type member848 struct {
	cl   *kgo.Client
	done chan struct{}
}

func startMember848(t *testing.T, addr, group, topic string, seen *seenRecords, opts ...kgo.Opt) *member848 {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.MetadataMaxAge(500 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m := &member848{cl: cl, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { seen.add(string(r.Value)) })
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *member848) close() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cl.Close()
	<-m.done
}

// describe848 is ConsumerGroupDescribe of one group.
func describe848(t *testing.T, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("ConsumerGroupDescribe: %v %v", resp, err)
	}
	return resp.Groups[0]
}

// waitAssigned waits until the group's members hold the partition counts want (sorted),
// every member stable at the group's assignment epoch.
func waitAssigned(t *testing.T, cl *kgo.Client, group string, want ...int) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last []int
	for {
		g := describe848(t, cl, group)
		last = last[:0]
		for _, m := range g.Members {
			if m.MemberEpoch == -2 {
				continue
			}
			n := 0
			for _, tp := range m.Assignment.TopicPartitions {
				n += len(tp.Partitions)
			}
			last = append(last, n)
		}
		sort.Ints(last)
		if g.State == "Stable" && fmt.Sprint(last) == fmt.Sprint(want) {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: state %s, members hold %v partitions; want %v", group, g.State, last, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// groupType is the group's type and state as ListGroups v5 reports them.
func groupType(t *testing.T, cl *kgo.Client, group string) (string, string) {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range resp.Groups {
		if g.Group == group {
			return g.GroupType, g.GroupState
		}
	}
	return "", ""
}

func produceTo(t *testing.T, addr, topic string, partition int32, n int, tag string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKIP848FranzGoJoinLeaveGrow: franz-go members opted in to KIP-848 share a topic through
// the coordinator's assignment (ApiVersions and ListGroups say it is the new protocol): a
// second member gets half, a leaving member's partitions go to the other, partitions added to
// the topic are assigned, and every record is consumed.
func TestKIP848FranzGoJoinLeaveGrow(t *testing.T) {
	b := startBroker(t, fast848)
	const topic, group = "k848", "g848"
	b.createTopic(topic, 4)
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	var hb, finalized bool
	for _, k := range av.ApiKeys {
		hb = hb || k.ApiKey == 68 && k.MaxVersion >= 1
	}
	for _, f := range av.FinalizedFeatures {
		finalized = finalized || f.Name == "group.version" && f.MaxVersionLevel == 1
	}
	if !hb || !finalized {
		t.Fatalf("ApiVersions: ConsumerGroupHeartbeat v1 %v, group.version 1 finalized %v", hb, finalized)
	}

	seen := &seenRecords{counts: map[string]int{}}
	produceN(t, b.addr, topic, 40, "one")
	startMember848(t, b.addr, group, topic, seen)
	seen.waitAll(t, "one", 40, 20*time.Second)
	if typ, _ := groupType(t, admin, group); typ != "consumer" {
		t.Fatalf("ListGroups type of the group: %q, want consumer", typ)
	}
	waitAssigned(t, admin, group, 4)

	m2 := startMember848(t, b.addr, group, topic, seen)
	g := waitAssigned(t, admin, group, 2, 2)
	if g.AssignorName != "uniform" {
		t.Errorf("assignor %q, want uniform (franz-go's sticky balancer asks for it)", g.AssignorName)
	}
	produceN(t, b.addr, topic, 40, "two")
	seen.waitAll(t, "two", 40, 20*time.Second)

	m2.close()
	waitAssigned(t, admin, group, 4)
	produceN(t, b.addr, topic, 20, "three")
	seen.waitAll(t, "three", 20, 20*time.Second)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = topic, 6
	cp.Topics = append(cp.Topics, cpt)
	cp.TimeoutMillis = 5000
	if resp, err := cp.RequestWith(context.Background(), admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions: %v %v", resp, err)
	}
	waitAssigned(t, admin, group, 6)
	produceTo(t, b.addr, topic, 5, 10, "grown")
	seen.waitAll(t, "grown", 10, 20*time.Second)
}

// TestKIP848FranzGoStaticMember: a static member that leaves with member epoch -2 keeps its
// partitions and its next instance takes them over; records produced meanwhile are consumed.
// franz-go's Close sends its -2 leave without the instance id, which Kafka refuses
// (INVALID_REQUEST: "InstanceId can't be null."), so the leave is sent here as the Java
// client sends it.
func TestKIP848FranzGoStaticMember(t *testing.T) {
	b := startBroker(t, fast848)
	const topic, group = "k848s", "g848s"
	b.createTopic(topic, 3)
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	seen := &seenRecords{counts: map[string]int{}}
	m := startMember848(t, b.addr, group, topic, seen, kgo.InstanceID("inst-1"))
	first := waitAssigned(t, admin, group, 3)
	produceN(t, b.addr, topic, 15, "one")
	seen.waitAll(t, "one", 15, 20*time.Second)
	m.close()
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	inst := "inst-1"
	leave.Group, leave.MemberID, leave.MemberEpoch, leave.InstanceID = group, first.Members[0].MemberID, -2, &inst
	if resp, err := leave.RequestWith(context.Background(), admin); err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v %v", resp, err)
	}
	g := describe848(t, admin, group)
	if len(g.Members) != 1 || g.Members[0].MemberEpoch != -2 || g.Members[0].InstanceID == nil || *g.Members[0].InstanceID != "inst-1" {
		t.Fatalf("after the static member closed: %+v", g.Members)
	}
	produceN(t, b.addr, topic, 15, "two")
	startMember848(t, b.addr, group, topic, seen, kgo.InstanceID("inst-1"))
	again := waitAssigned(t, admin, group, 3)
	if again.Members[0].MemberID == first.Members[0].MemberID {
		t.Errorf("the new instance kept the old member id %s", again.Members[0].MemberID)
	}
	seen.waitAll(t, "two", 15, 20*time.Second)
}

// TestKIP848OffFranzGoUsesClassic: with group.coordinator.rebalance.protocols=classic the
// node does not finalize group.version, ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION,
// and an opted-in franz-go consumer falls back to a classic group.
func TestKIP848OffFranzGoUsesClassic(t *testing.T) {
	b := startBroker(t, func(c *server.Config) { fast848(c); c.RebalanceProtocols = []string{"classic"} })
	const topic, group = "k848off", "g848off"
	b.createTopic(topic, 2)
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(av.FinalizedFeatures) != 0 {
		t.Fatalf("finalized features with the consumer protocol off: %+v", av.FinalizedFeatures)
	}
	seen := &seenRecords{counts: map[string]int{}}
	produceN(t, b.addr, topic, 10, "one")
	startMember848(t, b.addr, group, topic, seen)
	seen.waitAll(t, "one", 10, 20*time.Second)
	if typ, _ := groupType(t, admin, group); typ != "classic" {
		t.Fatalf("group type %q, want classic", typ)
	}
}

// TestKIP848Librdkafka: librdkafka (confluent-kafka-go) with group.protocol=consumer: a
// second consumer joins late, the first leaves, and every record produced along the way is
// consumed.
func TestKIP848Librdkafka(t *testing.T) {
	b := startBroker(t, fast848)
	const topic, group = "k848rd", "g848rd"
	b.createTopic(topic, 4)
	seen := &seenRecords{counts: map[string]int{}}
	type rdMember struct {
		c    *kafka.Consumer
		stop chan struct{}
		done chan struct{}
	}
	start := func() *rdMember {
		c, err := kafka.NewConsumer(&kafka.ConfigMap{
			"bootstrap.servers":                  b.addr,
			"group.id":                           group,
			"group.protocol":                     "consumer",
			"auto.offset.reset":                  "earliest",
			"auto.commit.interval.ms":            200,
			"topic.metadata.refresh.interval.ms": 1000,
			"log_level":                          3,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe(topic, nil); err != nil {
			t.Fatal(err)
		}
		m := &rdMember{c: c, stop: make(chan struct{}), done: make(chan struct{})}
		go func() {
			defer close(m.done)
			for {
				select {
				case <-m.stop:
					return
				default:
				}
				switch e := c.Poll(100).(type) {
				case *kafka.Message:
					seen.add(string(e.Value))
				case kafka.Error:
					if e.IsFatal() {
						t.Errorf("librdkafka: %v", e)
						return
					}
				}
			}
		}()
		return m
	}
	stop := func(m *rdMember) {
		select {
		case <-m.stop:
			return
		default:
		}
		close(m.stop)
		<-m.done
		if err := m.c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	produceN(t, b.addr, topic, 40, "one")
	m1 := start()
	defer stop(m1)
	seen.waitAll(t, "one", 40, 30*time.Second)
	if typ, _ := groupType(t, admin, group); typ != "consumer" {
		t.Fatalf("group type %q, want consumer", typ)
	}
	m2 := start()
	defer stop(m2)
	waitAssigned(t, admin, group, 2, 2)
	produceN(t, b.addr, topic, 40, "two")
	seen.waitAll(t, "two", 40, 30*time.Second)
	stop(m1)
	waitAssigned(t, admin, group, 4)
	produceN(t, b.addr, topic, 40, "three")
	seen.waitAll(t, "three", 40, 30*time.Second)
	seen.mu.Lock()
	defer seen.mu.Unlock()
	for v, n := range seen.counts {
		if !strings.Contains(v, "-") || n == 0 {
			t.Errorf("odd record %q x%d", v, n)
		}
	}
}

// TestKIP848FranzGoRegex: a member subscribing by regular expression (KIP-848's
// SubscribedTopicRegex, resolved by the coordinator) gets a topic created after it joined.
func TestKIP848FranzGoRegex(t *testing.T) {
	b := startBroker(t, fast848)
	const group = "g848rx"
	b.createTopic("rx-a", 2)
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	seen := &seenRecords{counts: map[string]int{}}
	produceN(t, b.addr, "rx-a", 10, "a")
	startMember848(t, b.addr, group, "rx-.*", seen, kgo.ConsumeRegex())
	seen.waitAll(t, "a", 10, 20*time.Second)
	g := describe848(t, admin, group)
	if len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil || !strings.Contains(*g.Members[0].SubscribedTopicRegex, "rx-") {
		t.Fatalf("member's subscription: %+v", g.Members)
	}
	// Created through CreateTopics, which tells the coordinator at once (a topic created
	// otherwise is found within 10 s, when the group's regular expressions are matched again).
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 5000
	for name, n := range map[string]int32{"rx-b": 3, "other": 1} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
		ct.Topics = append(ct.Topics, rt)
	}
	if resp, err := ct.RequestWith(context.Background(), admin); err != nil || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %+v %v", resp, err)
	}
	waitAssigned(t, admin, group, 5)
	produceN(t, b.addr, "rx-b", 9, "b")
	seen.waitAll(t, "b", 9, 20*time.Second)
}
