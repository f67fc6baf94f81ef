package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/segfs"
)

// TestKIP848GroupSurvivesPowerLoss: a KIP-848 group driven by raw heartbeats (members join,
// leave, reconcile and commit with their epochs) on the simulated power-loss file systems
// (powerLossNode: only what was synced survives). After each power loss the group is what was
// last answered: the same group and assignment epochs, members, epochs, held and target
// partitions, and committed offsets; no partition is held by two members; and every member
// carries on with its epoch (no FENCED_MEMBER_EPOCH, no UNKNOWN_MEMBER_ID).
func TestKIP848GroupSurvivesPowerLoss(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 848))
	p := &powerLossNode{t: t, proxy: newCutProxy(t), listen: "127.0.0.1:0", rng: rand.New(rand.NewPCG(seed, 3)),
		segFS: segfs.NewCrashableMem(), pebFS: vfs.NewCrashableMem()}
	p.start(t)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.srv.Shutdown(ctx)
		cancel()
		p.blog.Close()
	}()
	const topic, group, partitions = "pl848", "pl848-g", 6
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr()), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	type member struct {
		id    string
		epoch int32
		owned map[[16]byte][]int32
	}
	var members []*member
	beat := func(m *member, join bool) {
		t.Helper()
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, group, m.id, m.epoch
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if join {
			r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 30000, []string{topic}
		}
		for id, ps := range m.owned {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = id, ps
			r.Topics = append(r.Topics, rt)
		}
		resp, err := r.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			msg := ""
			if resp != nil && resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			t.Fatalf("heartbeat of %s at epoch %d: %v, error %v %s", m.id, m.epoch, err, resp.ErrorCode, msg)
		}
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.owned = map[[16]byte][]int32{}
			for _, at := range resp.Assignment.Topics {
				m.owned[at.TopicID] = slices.Sorted(slices.Values(at.Partitions))
			}
		}
	}
	leave := func(i int) {
		m := members[i]
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, group, m.id, -1
		if resp, err := r.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("leave of %s: %v %v", m.id, resp, err)
		}
		members = slices.Delete(members, i, i+1)
	}
	// commit commits an offset of every partition m holds, at its epoch.
	next := 0
	commit := func(m *member) {
		t.Helper()
		if len(m.owned) == 0 {
			return
		}
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.MemberID, r.Generation = 9, group, m.id, m.epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for _, ps := range m.owned {
			for _, part := range ps {
				next++
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = part, int64(next)
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		r.Topics = append(r.Topics, rt)
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("commit of %s: %v", m.id, err)
		}
		for _, rp := range resp.Topics[0].Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("commit of %s at epoch %d, partition %d: error %d", m.id, m.epoch, rp.Partition, rp.ErrorCode)
			}
		}
	}
	// state is the group as ConsumerGroupDescribe and OffsetFetch show it, as one string; it
	// fails the test if a partition is held by two members.
	state := func() string {
		t.Helper()
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{group}
		resp, err := d.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe: %v %v", resp, err)
		}
		g := resp.Groups[0]
		var b strings.Builder
		fmt.Fprintf(&b, "epoch %d/%d %s", g.Epoch, g.AssignmentEpoch, g.State)
		held := map[int32]string{}
		for _, m := range g.Members {
			var ps, target []int32
			for _, tp := range m.Assignment.TopicPartitions {
				for _, part := range tp.Partitions {
					if o, dup := held[part]; dup {
						t.Fatalf("partition %d held by %s and %s", part, o, m.MemberID)
					}
					held[part] = m.MemberID
					ps = append(ps, part)
				}
			}
			for _, tp := range m.TargetAssignment.TopicPartitions {
				target = append(target, tp.Partitions...)
			}
			slices.Sort(ps)
			slices.Sort(target)
			fmt.Fprintf(&b, "\n  %s@%d holds %v target %v", m.MemberID, m.MemberEpoch, ps, target)
		}
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group = group
		ofr, err := of.RequestWith(ctx, cl)
		if err != nil || ofr.ErrorCode != 0 {
			t.Fatalf("offset fetch: %v %v", ofr, err)
		}
		for _, tp := range ofr.Topics {
			slices.SortFunc(tp.Partitions, func(a, b kmsg.OffsetFetchResponseTopicPartition) int { return int(a.Partition - b.Partition) })
			for _, pp := range tp.Partitions {
				fmt.Fprintf(&b, "\n  offset %s/%d %d", tp.Topic, pp.Partition, pp.Offset)
			}
		}
		return b.String()
	}

	joined := 0
	for cycle := range 8 {
		// A few rounds of heartbeats (some members reconcile, some are left mid-way) and
		// commits at the members' epochs, then a join or a leave: the power loss comes right
		// after the group's record that answered it.
		for range 1 + rng.IntN(3) {
			for _, m := range members {
				if rng.IntN(4) != 0 {
					beat(m, false)
					commit(m)
				}
			}
		}
		switch {
		case len(members) < 2 || len(members) < 4 && rng.IntN(2) == 0:
			joined++
			m := &member{id: fmt.Sprintf("member-%d", joined), owned: map[[16]byte][]int32{}}
			members = append(members, m)
			beat(m, true)
		default:
			leave(rng.IntN(len(members)))
		}
		before := state()
		p.crash(t)
		if after := state(); after != before {
			t.Fatalf("cycle %d: the group after a power loss:\n%s\nwant as answered before it:\n%s", cycle, after, before)
		}
		// Every member carries on with the epoch it was last answered.
		for _, m := range members {
			beat(m, false)
		}
		t.Logf("cycle %d: %d members; %s", cycle, len(members), strings.SplitN(before, "\n", 2)[0])
	}
}
