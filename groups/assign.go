package groups

import (
	"slices"
	"sort"
)

// The server-side assignors of KIP-848 consumer groups (group.consumer.assignors): "uniform"
// (Kafka's UniformAssignor) and "range" (Kafka's RangeAssignor). Both are pure functions of
// the members' subscriptions, the topics' partition counts and, for uniform, the previous
// target assignment, so that the coordinator's state machine and the tests call them alike.

// Assignor names, as members name them in ConsumerGroupHeartbeat's ServerAssignor.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// topicID is a topic's UUID, as ConsumerGroupHeartbeat names topics.
type topicID = [16]byte

// assignment is the partitions of each topic one member holds or is to hold, each slice
// sorted.
type assignment map[topicID][]int32

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) has(t topicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a assignment) add(t topicID, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a assignment) remove(t topicID, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, t)
		} else {
			a[t] = ps
		}
	}
}

// minus is the partitions of a not in b.
func (a assignment) minus(b assignment) assignment {
	out := assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

// intersect is the partitions in both a and b.
func (a assignment) intersect(b assignment) assignment {
	out := assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// assignInput is what an assignor works from: members in a fixed order, the topics each
// subscribes to (only topics that exist), every subscribed topic's partition count, and the
// previous target assignment (stickiness).
type assignInput struct {
	members    []string
	subscribed map[string][]topicID // sorted
	partitions map[topicID]int32
	previous   map[string]assignment
}

type tp struct {
	t topicID
	p int32
}

func tpLess(a, b tp) bool {
	if c := compareID(a.t, b.t); c != 0 {
		return c < 0
	}
	return a.p < b.p
}

func compareID(a, b topicID) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// assignUniform is the uniform assignor: every partition of a subscribed topic goes to one
// member subscribing to it, members end up with partition counts as even as their
// subscriptions allow, and a partition stays with its previous member where balance allows
// (Kafka's UniformAssignor: its optimized builder for one subscription, its general builder
// otherwise; this one is one greedy algorithm for both).
//
// It runs in three steps: (1) each member keeps the partitions of its previous target it
// still subscribes to, up to the ceiling of an even share for a homogeneous group; (2) every
// partition left goes to the subscribing member holding the fewest (ties: member order);
// (3) while some partition can move from a member to one of its subscribers holding at least
// two fewer, it moves (the fullest giver first). Each move lowers the sum of squared counts,
// so step 3 ends; it is also bounded by the partition count.
func assignUniform(in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	count := make(map[string]int, len(in.members))
	subs := make(map[string]map[topicID]bool, len(in.members))
	for _, m := range in.members {
		out[m] = assignment{}
		subs[m] = map[topicID]bool{}
		for _, t := range in.subscribed[m] {
			subs[m][t] = true
		}
	}
	var all []tp
	subscribers := map[topicID][]string{}
	for _, m := range in.members {
		for _, t := range in.subscribed[m] {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	for t := range subscribers {
		for p := int32(0); p < in.partitions[t]; p++ {
			all = append(all, tp{t, p})
		}
	}
	sort.Slice(all, func(i, j int) bool { return tpLess(all[i], all[j]) })
	if len(in.members) == 0 || len(all) == 0 {
		return out
	}
	ceiling := (len(all) + len(in.members) - 1) / len(in.members)
	taken := make(map[tp]bool, len(all))
	// (1) stickiness.
	for _, m := range in.members {
		prev := in.previous[m]
		var keep []tp
		for t, ps := range prev {
			if !subs[m][t] {
				continue
			}
			for _, p := range ps {
				if p < in.partitions[t] {
					keep = append(keep, tp{t, p})
				}
			}
		}
		sort.Slice(keep, func(i, j int) bool { return tpLess(keep[i], keep[j]) })
		for _, x := range keep {
			if count[m] >= ceiling || taken[x] {
				continue
			}
			taken[x] = true
			out[m].add(x.t, x.p)
			count[m]++
		}
	}
	// (2) the rest, to the least loaded subscriber.
	for _, x := range all {
		if taken[x] {
			continue
		}
		best := ""
		for _, m := range subscribers[x.t] {
			if best == "" || count[m] < count[best] {
				best = m
			}
		}
		taken[x] = true
		out[best].add(x.t, x.p)
		count[best]++
	}
	// (3) balance.
	for moves := 0; moves < len(all); moves++ {
		moved := false
		givers := slices.Clone(in.members)
		sort.SliceStable(givers, func(i, j int) bool { return count[givers[i]] > count[givers[j]] })
	give:
		for _, from := range givers {
			ts := make([]topicID, 0, len(out[from]))
			for t := range out[from] {
				ts = append(ts, t)
			}
			slices.SortFunc(ts, compareID)
			for _, t := range ts {
				to := ""
				for _, m := range subscribers[t] {
					if count[m]+2 <= count[from] && (to == "" || count[m] < count[to]) {
						to = m
					}
				}
				if to == "" {
					continue
				}
				ps := out[from][t]
				p := ps[len(ps)-1]
				out[from].remove(t, p)
				out[to].add(t, p)
				count[from]--
				count[to]++
				moved = true
				break give
			}
		}
		if !moved {
			break
		}
	}
	return out
}

// assignRange is the range assignor (Kafka's RangeAssignor, as the classic client-side one):
// for each topic, its subscribers sorted by member id share its partitions in contiguous
// ranges, the first (partitions mod subscribers) getting one more. Members with the same
// subscriptions get the same partition numbers of co-partitioned topics.
func assignRange(in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	subscribers := map[topicID][]string{}
	for _, m := range in.members {
		out[m] = assignment{}
		for _, t := range in.subscribed[m] {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	for t, ms := range subscribers {
		ms = slices.Clone(ms)
		slices.Sort(ms)
		n := int(in.partitions[t])
		per, extra := n/len(ms), n%len(ms)
		next := 0
		for i, m := range ms {
			k := per
			if i < extra {
				k++
			}
			for j := 0; j < k; j++ {
				out[m][t] = append(out[m][t], int32(next))
				next++
			}
		}
	}
	return out
}
