package groups

import (
	"fmt"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/groups/assign"
	"inlet/wire"
)

// FuzzConsumerHeartbeats drives a KIP-848 group with a sequence of heartbeats read from the
// input: joins, regular heartbeats (with an epoch off by a little, and owned partitions as
// told, or a subset, or stale), leaves and static leaves, subscriptions by names and by
// regular expressions, from two principals. Invariants after every heartbeat:
//   - it never panics, and every answer is an error or a member epoch;
//   - no partition is held (assigned or revoking) by two members, and owners names exactly
//     the partitions members hold;
//   - the group holds at most MaxSize members, each principal at most MaxMembersPerPrincipal
//     over every group, and the per-principal counts are the members there are;
//   - the group's regex entries are exactly the regexes its members use, each counted once per
//     member, at most MaxRegexes of them.
func FuzzConsumerHeartbeats(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0, 0, 0, 16, 17, 32, 33, 48, 49, 64, 65, 80, 81, 96, 97, 112, 113, 128, 129, 144})
	f.Add([]byte{3, 19, 35, 51, 67, 83, 99, 115, 131, 147, 163, 179, 195, 211, 227, 243, 2, 18, 34, 50})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 96 { // 48 heartbeats: enough to join, rebalance and leave 8 members
			ops = ops[:96]
		}
		topicB := TopicMeta{Name: "b", ID: [16]byte{2}, Partitions: 3}
		ts := &topicSet{m: map[string]TopicMeta{"a": topicA, "b": topicB}}
		c := newConsumerCoordinator(t, newRecStore(), ts, func(cc *ConsumerConfig) {
			cc.MaxSize, cc.MaxMembersPerPrincipal, cc.MaxRegexes = 5, 4, 2
		})
		type fm struct {
			epoch int32
			owned assign.Partitions
			in    bool
		}
		const members = 8
		state := [members]fm{}
		regexes := []string{"a", "b", "a|b", ".*", "a(("}
		names := [][]string{{"a"}, {"b"}, {"a", "b"}, {}}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			mi := int(op>>4) % members
			m := &state[mi]
			id := fmt.Sprintf("m%d", mi)
			h := ConsumerHeartbeat{Principal: fmt.Sprintf("p%d", mi%2)}
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Version, r.Group, r.MemberID = 1, "g", id
			if mi >= 6 {
				inst := fmt.Sprintf("i%d", mi%2)
				r.InstanceID = &inst
			}
			switch op & 7 {
			case 0, 1: // join
				r.RebalanceTimeoutMillis = 30000
				r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				if arg&1 == 0 {
					r.SubscribedTopicNames = names[int(arg>>1)%len(names)]
				} else {
					re := regexes[int(arg>>1)%len(regexes)]
					r.SubscribedTopicRegex = &re
				}
			case 2, 3, 4: // heartbeat
				r.MemberEpoch = m.epoch + int32(arg%3) - 1
				if r.MemberEpoch <= 0 {
					r.MemberEpoch = m.epoch
				}
				switch arg >> 2 % 4 {
				case 0: // owned not reported
				case 1, 2: // what it was told
					r.Topics = heartbeatTopics(m.owned)
				case 3: // less than it was told
					less := m.owned.Clone()
					for t, ps := range less {
						less[t] = ps[:len(ps)/2]
					}
					r.Topics = heartbeatTopics(less)
				}
				if arg&0x40 != 0 {
					re := regexes[int(arg>>4)%len(regexes)]
					r.SubscribedTopicRegex = &re
				}
				if arg&0x80 != 0 {
					r.SubscribedTopicNames = names[int(arg>>5)%len(names)]
				}
			case 5, 6: // leave
				r.MemberEpoch = -1
			case 7: // static leave
				r.MemberEpoch = -2
			}
			resp := c.ConsumerHeartbeat(r, h)
			if resp.ErrorCode == wire.ErrNone {
				switch {
				case resp.MemberEpoch < 0:
					*m = fm{}
				default:
					m.in, m.epoch = true, resp.MemberEpoch
					if resp.Assignment != nil {
						m.owned = assign.Partitions{}
						for _, at := range resp.Assignment.Topics {
							for _, p := range at.Partitions {
								m.owned.Add(at.TopicID, p)
							}
						}
					}
				}
			}
			checkConsumerInvariants(t, c)
		}
	})
}

func heartbeatTopics(a assign.Partitions) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for t, ps := range a {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = t, ps
		out = append(out, rt)
	}
	return out
}

// checkConsumerInvariants checks group "g" of c against FuzzConsumerHeartbeats' invariants.
func checkConsumerInvariants(t *testing.T, c *Coordinator) {
	t.Helper()
	g := c.get("g", false)
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	cg := g.cg
	if cg == nil {
		return
	}
	if len(cg.members) > c.cfg.Consumer.MaxSize {
		t.Fatalf("%d members, bound %d", len(cg.members), c.cfg.Consumer.MaxSize)
	}
	held := map[tp]string{}
	perPrincipal := map[string]int{}
	regexUsers := map[string]int{}
	for id, m := range cg.members {
		perPrincipal[m.principal]++
		if m.regex != "" {
			regexUsers[m.regex]++
		}
		for _, a := range []assign.Partitions{m.assigned, m.revoking} {
			for t2, ps := range a {
				for _, p := range ps {
					if o, dup := held[tp{t2, p}]; dup {
						t.Fatalf("partition %x/%d held by %s and %s", t2[:1], p, o, id)
					}
					held[tp{t2, p}] = id
				}
			}
		}
	}
	if !maps.Equal(held, cg.owners) {
		t.Fatalf("owners %v, members hold %v", cg.owners, held)
	}
	for p, n := range perPrincipal {
		if got := c.MembersOf(p); got != n || n > c.cfg.Consumer.MaxMembersPerPrincipal {
			t.Fatalf("principal %s: counted %d, holds %d, bound %d", p, got, n, c.cfg.Consumer.MaxMembersPerPrincipal)
		}
	}
	if len(cg.regexes) != len(regexUsers) || len(cg.regexes) > c.cfg.Consumer.MaxRegexes {
		t.Fatalf("regex entries %d, used %v, bound %d", len(cg.regexes), regexUsers, c.cfg.Consumer.MaxRegexes)
	}
	for s, e := range cg.regexes {
		if e.users != regexUsers[s] {
			t.Fatalf("regex %q counts %d users, %d use it", s, e.users, regexUsers[s])
		}
	}
}
