package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/quota"
	"inlet/server"
	"inlet/wire"
)

// Floods of client-made state against small bounds (README's "Hostile clients"): producer
// ids, auto-created topics, CreateTopics partitions and group ids, each up to and past its
// bound. The bound's error is answered, a bystander producing throughout keeps being served
// (p99 under a second), and the process's RSS is sampled.

// bystander produces one record at a time to its own topic until stopped and keeps each
// produce's latency.
type boundsBystander struct {
	stop    chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	lat     []time.Duration
	errs    int
	lastErr error
}

func startBoundsBystander(t *testing.T, addr string) *boundsBystander {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bystander"), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	// The topic and the producer's window exist before the flood starts.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatalf("bystander's first produce: %v", err)
	}
	by := &boundsBystander{stop: make(chan struct{})}
	by.done.Add(1)
	go func() {
		defer by.done.Done()
		defer cl.Close()
		for i := 0; ; i++ {
			select {
			case <-by.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			began := time.Now()
			err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr()
			cancel()
			by.mu.Lock()
			by.lat = append(by.lat, time.Since(began))
			if err != nil {
				by.errs++
				by.lastErr = err
			}
			by.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return by
}

// finish stops the bystander and checks that it was served throughout: no error, p99 < 1 s.
func (by *boundsBystander) finish(t *testing.T) {
	t.Helper()
	close(by.stop)
	by.done.Wait()
	by.mu.Lock()
	defer by.mu.Unlock()
	if len(by.lat) == 0 {
		t.Fatal("the bystander never produced during the flood")
	}
	sort.Slice(by.lat, func(i, j int) bool { return by.lat[i] < by.lat[j] })
	p99 := by.lat[len(by.lat)*99/100]
	t.Logf("bystander: %d produces, p50 %v, p99 %v, max %v", len(by.lat), by.lat[len(by.lat)/2], p99, by.lat[len(by.lat)-1])
	if by.errs > 0 {
		t.Errorf("the bystander's produce failed %d times (last: %v)", by.errs, by.lastErr)
	}
	if p99 >= time.Second {
		t.Errorf("the bystander's p99 is %v, want under 1 s", p99)
	}
}

// rssSampler samples the process's resident set every 20 ms (the broker runs in the test's
// process, so this is broker and clients together).
type rssSampler struct {
	stop  chan struct{}
	done  chan struct{}
	first int64
	peak  int64
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func sampleRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{}), first: rssBytes()}
	s.peak = s.first
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.peak = max(s.peak, rssBytes())
			}
		}
	}()
	return s
}

// finish stops sampling and checks that RSS grew by less than bound.
func (s *rssSampler) finish(t *testing.T, bound int64) {
	t.Helper()
	close(s.stop)
	<-s.done
	t.Logf("RSS: %d MiB at the start, peak %d MiB", s.first>>20, s.peak>>20)
	if s.first > 0 && s.peak-s.first > bound {
		t.Errorf("RSS grew by %d MiB, want under %d MiB", (s.peak-s.first)>>20, bound>>20)
	}
}

func boundedBroker(t *testing.T, mod func(*server.Config), logMod func(*batchlog.Options)) *broker {
	t.Helper()
	cfg := testServerConfig()
	if mod != nil {
		mod(&cfg)
	}
	b := &broker{t: t, dir: t.TempDir(), cfg: cfg, logMod: logMod}
	b.start()
	t.Cleanup(b.stop)
	return b
}

// TestProducerIDFloodIsBounded: producers each taking a producer id and writing one
// idempotent batch fill --max-concurrent-producer-ids; past it, while the windows are live,
// the next are refused THROTTLING_QUOTA_EXCEEDED; the bystander goes on; a restart loads no
// more than the bound.
func TestProducerIDFloodIsBounded(t *testing.T) {
	const bound, flood = 300, 500
	b := boundedBroker(t, nil, func(o *batchlog.Options) { o.MaxProducerWindows = bound })
	by := startBoundsBystander(t, b.addr) // holds one window
	rss := sampleRSS()
	b.createTopic("flood", 1)
	rc := dialRaw(t, b.addr)
	ok, refused := 0, 0
	for i := 0; i < flood; i++ {
		pid := rc.initProducerID()
		res := rc.produceOne(9, "flood", 0, plainBatch(1, time.Now().UnixMilli(), "f").idempotent(pid, 0, 0).encode())
		switch res.ErrorCode {
		case 0:
			ok++
		case wire.ErrThrottlingQuotaExceeded:
			refused++
		default:
			t.Fatalf("producer %d: error %d", i, res.ErrorCode)
		}
	}
	by.finish(t)
	rss.finish(t, 256<<20)
	if ok != bound-1 || refused != flood-ok {
		t.Fatalf("%d producers accepted, %d refused; want %d accepted (the bystander holds a window) and the rest refused", ok, refused, bound-1)
	}
	if st := b.blog.Stats().Producers; st.Held != bound || st.Refused != uint64(refused) {
		t.Fatalf("producer windows %+v, want %d held and %d refused", st, bound, refused)
	}
	began := time.Now()
	b.restart()
	t.Logf("restart with %d producer windows: %v", bound, time.Since(began))
	if st := b.blog.Stats().Producers; st.Held > bound {
		t.Fatalf("%d windows after the restart, over the bound of %d", st.Held, bound)
	}
}

// TestAutoCreateFloodIsBounded: Metadata requests naming new topics create them up to
// --max-partitions, then are answered POLICY_VIOLATION; CreateTopics and CreatePartitions past
// it likewise; the bystander goes on.
func TestAutoCreateFloodIsBounded(t *testing.T) {
	const bound = 200 // 4 partitions per auto-created topic: 50 topics, the bystander's included
	b := boundedBroker(t, func(c *server.Config) { c.MaxPartitions = bound }, nil)
	by := startBoundsBystander(t, b.addr)
	rss := sampleRSS()
	rc := dialRaw(t, b.addr)
	created, refused := 0, 0
	for i := 0; i < 100; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 9, true
		name := fmt.Sprintf("auto-%d", i)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		switch code := resp.Topics[0].ErrorCode; code {
		case wire.ErrLeaderNotAvailable:
			created++
		case wire.ErrPolicyViolation:
			refused++
		default:
			t.Fatalf("metadata for %s: error %d", name, code)
		}
	}
	if created != bound/4-1 || refused != 100-created {
		t.Fatalf("%d topics auto-created, %d refused; want %d created", created, refused, bound/4-1)
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	for _, n := range []int32{10000, 1} {
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = fmt.Sprintf("big-%d", n), n, -1
		ct.Topics = append(ct.Topics, tt)
	}
	for _, tt := range rc.roundTrip(ct).(*kmsg.CreateTopicsResponse).Topics {
		if tt.ErrorCode != wire.ErrPolicyViolation || tt.ErrorMessage == nil || !strings.Contains(*tt.ErrorMessage, "max.partitions") {
			t.Fatalf("CreateTopics %s past the bound: error %d %v", tt.Topic, tt.ErrorCode, tt.ErrorMessage)
		}
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "auto-0", 8
	cp.Topics = append(cp.Topics, cpt)
	if got := rc.roundTrip(cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; got != wire.ErrPolicyViolation {
		t.Fatalf("CreatePartitions past the bound: error %d", got)
	}
	by.finish(t)
	rss.finish(t, 128<<20)
	if n := b.blog.PartitionCount(); n != bound {
		t.Fatalf("%d partitions, want %d", n, bound)
	}
	// Deleting a topic frees its partitions for another.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TopicNames = 4, []string{"auto-1"}
	if got := rc.roundTrip(dt).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; got != 0 {
		t.Fatalf("DeleteTopics: error %d", got)
	}
	ct = kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 7
	tt := kmsg.NewCreateTopicsRequestTopic()
	tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "after-delete", 4, -1
	ct.Topics = append(ct.Topics, tt)
	if got := rc.roundTrip(ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; got != 0 {
		t.Fatalf("CreateTopics after a deletion freed room: error %d", got)
	}
}

// TestControllerMutationRate: KIP-599's controller_mutation_rate, 10 partitions a second:
// CreateTopics v6+ takes the topic that goes over and refuses the next with
// THROTTLING_QUOTA_EXCEEDED and a throttle time; an older version is accepted and throttled;
// auto-creation is refused while over; DeleteTopics counts too.
func TestControllerMutationRate(t *testing.T) {
	b := boundedBroker(t, func(c *server.Config) {
		c.Quotas = quota.Bounds{quota.DefaultUser: {quota.ControllerMutationRate: 10}}
	}, nil)
	// A throttled answer mutes its connection for the throttle (as Kafka mutes the channel),
	// so the requests that must find the client over its quota come on a second connection
	// of the same user.
	first, rc := dialRaw(t, b.addr), dialRaw(t, b.addr)
	create := func(rc *rawConn, version int16, name string, partitions int32) (int16, int32) {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version = version
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = name, partitions, -1
		ct.Topics = append(ct.Topics, tt)
		resp := rc.roundTrip(ct).(*kmsg.CreateTopicsResponse)
		return resp.Topics[0].ErrorCode, resp.ThrottleMillis
	}
	if code, _ := create(first, 7, "a", 30); code != 0 {
		t.Fatalf("the first creation (takes the client over): error %d", code)
	}
	code, throttle := create(rc, 7, "b", 1)
	if code != wire.ErrThrottlingQuotaExceeded || throttle <= 0 {
		t.Fatalf("a creation while over the quota: error %d, throttle %d ms; want THROTTLING_QUOTA_EXCEEDED with a throttle", code, throttle)
	}
	if code, throttle := create(dialRaw(t, b.addr), 5, "c", 1); code != 0 || throttle <= 0 {
		t.Fatalf("CreateTopics v5 while over the quota: error %d, throttle %d ms; want accepted and throttled", code, throttle)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = 9, true
	name := "auto"
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	if got := dialRaw(t, b.addr).roundTrip(req).(*kmsg.MetadataResponse).Topics[0].ErrorCode; got != wire.ErrThrottlingQuotaExceeded {
		t.Fatalf("auto-creation while over the quota: error %d", got)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TopicNames = 5, []string{"a"}
	if resp := dialRaw(t, b.addr).roundTrip(dt).(*kmsg.DeleteTopicsResponse); resp.Topics[0].ErrorCode != wire.ErrThrottlingQuotaExceeded || resp.ThrottleMillis <= 0 {
		t.Fatalf("DeleteTopics v5 while over the quota: error %d, throttle %d", resp.Topics[0].ErrorCode, resp.ThrottleMillis)
	}
	if _, ok := b.blog.Topic("a"); !ok {
		t.Fatal("a refused deletion deleted the topic")
	}
}

// TestGroupFloodIsBounded: group ids each committing one offset fill --max-groups; past it a
// commit or a JoinGroup that would create a group is refused POLICY_VIOLATION, while existing
// groups go on committing; the bystander goes on.
func TestGroupFloodIsBounded(t *testing.T) {
	const bound = 200
	b := boundedBroker(t, func(c *server.Config) { c.MaxGroups = bound }, nil)
	by := startBoundsBystander(t, b.addr)
	rss := sampleRSS()
	rc := dialRaw(t, b.addr)
	commit := func(group string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "bystander"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	ok, refused := 0, 0
	for i := 0; i < bound+100; i++ {
		switch code := commit(fmt.Sprintf("g-%d", i)); code {
		case 0:
			ok++
		case wire.ErrPolicyViolation:
			refused++
		default:
			t.Fatalf("commit of group %d: error %d", i, code)
		}
	}
	if ok != bound || refused != 100 {
		t.Fatalf("%d groups committed, %d refused; want %d and 100", ok, refused, bound)
	}
	if code := commit("g-7"); code != 0 {
		t.Fatalf("an existing group's commit at the bound: error %d", code)
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = 5, "new-group", 10000, 10000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jg.Protocols = append(jg.Protocols, jp)
	if got := rc.roundTrip(jg).(*kmsg.JoinGroupResponse).ErrorCode; got != wire.ErrPolicyViolation {
		t.Fatalf("JoinGroup of a new group at the bound: error %d", got)
	}
	by.finish(t)
	rss.finish(t, 128<<20)
}

// TestPartitionBoundPerPrincipal: the partitions of the topics one principal created are
// bounded apart from the node's bound, across a restart (the creator is kept with each topic),
// and a deletion gives the room back.
func TestPartitionBoundPerPrincipal(t *testing.T) {
	b := boundedBroker(t, func(c *server.Config) { c.MaxPartitions, c.MaxPartitionsPerPrincipal = 1000, 20 }, nil)
	create := func(name string, partitions int32) int16 {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version = 7
		tt := kmsg.NewCreateTopicsRequestTopic()
		tt.Topic, tt.NumPartitions, tt.ReplicationFactor = name, partitions, -1
		ct.Topics = append(ct.Topics, tt)
		return dialRaw(t, b.addr).roundTrip(ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}
	for i := range 2 {
		if code := create(fmt.Sprintf("mine-%d", i), 10); code != 0 {
			t.Fatalf("topic %d within the principal's bound: error %d", i, code)
		}
	}
	if code := create("one-more", 1); code != wire.ErrPolicyViolation {
		t.Fatalf("a topic past the principal's bound: error %d", code)
	}
	// Topics the node made itself (no principal) count only against the node's bound.
	b.createTopic("nodes-own", 100)
	b.restart()
	if code := create("one-more", 1); code != wire.ErrPolicyViolation {
		t.Fatalf("after a restart, a topic past the principal's bound: error %d", code)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version, dt.TopicNames = 4, []string{"mine-0"}
	if got := dialRaw(t, b.addr).roundTrip(dt).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; got != 0 {
		t.Fatalf("DeleteTopics: error %d", got)
	}
	if code := create("one-more", 10); code != 0 {
		t.Fatalf("a topic after a deletion gave room back: error %d", code)
	}
}

// TestGroupBoundPerPrincipal: one principal's requests create groups up to its bound, then a
// creation is refused POLICY_VIOLATION while its existing groups go on; a deleted group gives
// the room back.
func TestGroupBoundPerPrincipal(t *testing.T) {
	const bound = 5
	b := boundedBroker(t, func(c *server.Config) { c.MaxGroups, c.MaxGroupsPerPrincipal = 1000, bound }, nil)
	b.createTopic("t", 1)
	rc := dialRaw(t, b.addr)
	commit := func(group string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	for i := range bound {
		if code := commit(fmt.Sprintf("g-%d", i)); code != 0 {
			t.Fatalf("group %d within the bound: error %d", i, code)
		}
	}
	if code := commit("one-more"); code != wire.ErrPolicyViolation {
		t.Fatalf("a group past the principal's bound: error %d", code)
	}
	if code := commit("g-2"); code != 0 {
		t.Fatalf("an existing group at the bound: error %d", code)
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = 5, "new-group", 10000, 10000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jg.Protocols = append(jg.Protocols, jp)
	if got := rc.roundTrip(jg).(*kmsg.JoinGroupResponse).ErrorCode; got != wire.ErrPolicyViolation {
		t.Fatalf("JoinGroup of a new group past the principal's bound: error %d", got)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Version, dg.Groups = 2, []string{"g-0"}
	if got := rc.roundTrip(dg).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; got != 0 {
		t.Fatalf("DeleteGroups: error %d", got)
	}
	if code := commit("one-more"); code != 0 {
		t.Fatalf("a group after a deletion gave room back: error %d", code)
	}
}
