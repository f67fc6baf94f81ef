package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
	"inlet/wire"
)

// TestKIP848FloodIsBounded: one client floods ConsumerGroupHeartbeat joins: members with
// distinct regular expressions (and regexes that compile to blow-ups), then new member ids
// with the largest subscriptions allowed (and larger ones) across many groups, then
// ConsumerGroupDescribe of thousands of groups. Each bound answers its error
// (INVALID_REGULAR_EXPRESSION, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED), the process's RSS
// stays bounded, and a KIP-848 consumer that joined before the flood, with a producer beside
// it, keeps being served.
func TestKIP848FloodIsBounded(t *testing.T) {
	const perPrincipal, regexes, names = 200, 8, 64
	b := boundedBroker(t, func(c *server.Config) {
		fast848(c)
		c.ConsumerGroups.MaxMembersPerPrincipal = perPrincipal
		c.ConsumerGroups.MaxRegexes = regexes
		c.ConsumerGroups.MaxSubscribedTopics = names
	}, nil)
	by := startBoundsBystander(t, b.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The bystander consumer: a KIP-848 member of its own group, counting what it consumes.
	var consumed atomic.Int64
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("bystander-g"), kgo.ConsumeTopics("bystander"),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	consDone := make(chan struct{})
	go func() {
		defer close(consDone)
		for {
			fs := cons.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			consumed.Add(int64(fs.NumRecords()))
		}
	}()
	defer func() { cons.Close(); <-consDone }()
	for consumed.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the bystander consumer consumed nothing before the flood")
		}
		time.Sleep(20 * time.Millisecond)
	}

	rss := sampleRSS()
	heapBefore := liveHeap()
	rc := dialRaw(t, b.addr)
	join := func(group, id string, subscribed []string, regex *string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.RebalanceTimeoutMillis = 1, group, id, 30000
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r.SubscribedTopicNames, r.SubscribedTopicRegex = subscribed, regex
		if subscribed == nil && regex == nil {
			r.SubscribedTopicNames = []string{}
		}
		return rc.roundTrip(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	counts := map[string]int{}
	tally := func(what string, resp *kmsg.ConsumerGroupHeartbeatResponse) {
		counts[fmt.Sprintf("%s:%d", what, resp.ErrorCode)]++
		if resp.ErrorCode != 0 && resp.ErrorMessage == nil {
			t.Errorf("%s refused %d without a message", what, resp.ErrorCode)
		}
	}

	// Regular expressions: blow-ups, then distinct ones in one group (past the bound, a new
	// one is refused before it is compiled).
	for i := range 20 {
		blowup := strings.Repeat("a{1000}", 140) + fmt.Sprint(i)
		tally("blowup", join("rx", fmt.Sprintf("bx-%d", i), nil, &blowup))
	}
	for i := range regexes + 20 {
		re := fmt.Sprintf("flood-%d-.*", i)
		tally("regex", join("rx", fmt.Sprintf("rx-%d", i), nil, &re))
	}
	// Subscriptions past the bounds.
	var many, huge []string
	for i := range names + 1 {
		many = append(many, fmt.Sprintf("%s-%03d", strings.Repeat("n", 240), i))
	}
	huge = append(huge, strings.Repeat("h", 30000))
	for i := range 50 {
		tally("too many names", join("subs", fmt.Sprintf("s-%d", i), many, nil))
		tally("huge name", join("subs", fmt.Sprintf("h-%d", i), huge, nil))
	}
	// New member ids with the largest subscriptions allowed, 20 to a group, past the
	// principal's bound.
	for i := range perPrincipal + 200 {
		tally("member", join(fmt.Sprintf("flood-%d", i/20), fmt.Sprintf("m-%d", i), many[:names], nil))
	}
	t.Logf("answers (what:error code): %v", counts)
	want := map[string]int{
		fmt.Sprintf("regex:%d", wire.ErrNone):                      regexes,
		fmt.Sprintf("regex:%d", wire.ErrInvalidRequest):            20,
		fmt.Sprintf("blowup:%d", wire.ErrInvalidRegularExpression): 20,
		fmt.Sprintf("too many names:%d", wire.ErrInvalidRequest):   50,
		fmt.Sprintf("huge name:%d", wire.ErrInvalidRequest):        50,
		// The bystander holds one member and the regex members count too.
		fmt.Sprintf("member:%d", wire.ErrNone):                perPrincipal - 1 - regexes,
		fmt.Sprintf("member:%d", wire.ErrGroupMaxSizeReached): 200 + 1 + regexes,
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s answered %d times, want %d", k, counts[k], n)
		}
	}

	// What the flood left in the heap: the members it was allowed (191 with 64 names of 244
	// bytes each, their groups' records), nothing for what was refused.
	if grown := liveHeap() - heapBefore; grown > 32<<20 {
		t.Errorf("the live heap grew by %d MiB, want under 32 MiB", grown>>20)
	} else {
		t.Logf("the live heap grew by %.1f MiB", float64(grown)/(1<<20))
	}

	// ConsumerGroupDescribe floods: every flood group and 2,000 that do not exist, ten times
	// over.
	var described []string
	for i := range (perPrincipal + 200) / 20 {
		described = append(described, fmt.Sprintf("flood-%d", i))
	}
	for i := range 2000 {
		described = append(described, fmt.Sprintf("nowhere-%d", i))
	}
	for range 10 {
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups, d.IncludeAuthorizedOperations = described, true
		resp := rc.roundTrip(d).(*kmsg.ConsumerGroupDescribeResponse)
		if len(resp.Groups) != len(described) {
			t.Fatalf("ConsumerGroupDescribe of %d groups answered %d", len(described), len(resp.Groups))
		}
		withMembers := 0
		for _, g := range resp.Groups {
			switch {
			case strings.HasPrefix(g.Group, "nowhere-") && g.ErrorCode != wire.ErrGroupIDNotFound:
				t.Fatalf("describe of %s: error %d, want GROUP_ID_NOT_FOUND", g.Group, g.ErrorCode)
			case strings.HasPrefix(g.Group, "flood-") && len(g.Members) > 0:
				withMembers++
			}
		}
		if want := (perPrincipal - 1 - regexes + 19) / 20; withMembers != want {
			t.Fatalf("%d flood groups described with members, want %d", withMembers, want)
		}
	}

	// The bystander consumer still gets what is produced after the flood.
	before := consumed.Load()
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic("bystander"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint("after-", i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for consumed.Load() < before+20 {
		if ctx.Err() != nil {
			t.Fatalf("the bystander consumer got %d of 20 records produced after the flood", consumed.Load()-before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	by.finish(t)
	// Mostly garbage of the joins' group records and the describe replies (the live heap is
	// checked above); the race detector's shadow memory grows with it.
	bound := int64(192 << 20)
	if raceEnabled {
		bound = 384 << 20
	}
	rss.finish(t, bound)
}

// liveHeap is the heap in use after a collection (the broker runs in the test's process).
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestFuzzCorpusDrivesConsumerGroupAPIs: the protocol fuzzers' requests of keys 68 and 69, as
// fillFuzzRequest makes them, reach the KIP-848 state machine (a join, a described consumer
// group) at every served version, rather than being refused at the door, so the fuzzers'
// mutations of them exercise the coordinator.
func TestFuzzCorpusDrivesConsumerGroupAPIs(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("fz", 1)
	rc := dialRaw(t, b.addr)
	for _, key := range []int16{68, 69} {
		for v := int16(0); v <= servedMax(key); v++ {
			req := kmsg.RequestForKey(key)
			fillFuzzRequest(req)
			req.SetVersion(v)
			switch resp := rc.roundTrip(req).(type) {
			case *kmsg.ConsumerGroupHeartbeatResponse:
				if resp.ErrorCode != 0 || resp.MemberEpoch <= 0 {
					t.Errorf("fuzz corpus ConsumerGroupHeartbeat v%d: error %d, epoch %d; want a join", v, resp.ErrorCode, resp.MemberEpoch)
				}
			case *kmsg.ConsumerGroupDescribeResponse:
				if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Members) == 0 {
					t.Errorf("fuzz corpus ConsumerGroupDescribe v%d: %+v; want the group described", v, resp.Groups)
				}
			}
		}
	}
}
