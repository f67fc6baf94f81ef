// Package assign is the server-side assignors of KIP-848 consumer groups
// (group.consumer.assignors): "uniform" (Kafka's UniformAssignor) and "range" (Kafka's
// RangeAssignor), the choice of a group's assignor from its members' (Preferred), and the
// partition sets they compute (Partitions) with their stored form. All of it is pure
// functions of the members' subscriptions, the topics' partition counts and, for uniform, the
// previous target assignment: no I/O, no goroutines, no locks. The group coordinator
// (package groups) calls them under a group's mutex when the group epoch moves past the
// target's, and the tests call them alike.
package assign

import (
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
)

// The assignors' names, as group.consumer.assignors and a member's ServerAssignor name them.
const (
	UniformName = "uniform"
	RangeName   = "range"
)

// ByName runs the assignor called name: Range for RangeName, Uniform otherwise.
func ByName(name string, in Input) map[string]Partitions {
	if name == RangeName {
		return Range(in)
	}
	return Uniform(in)
}

// Preferred is ConsumerGroup.computePreferredServerAssignor: of the configured assignors
// (group.consumer.assignors), the one the members' ServerAssignor names most often (ties: the
// configured order; "" names none), else the first configured.
func Preferred(configured, chosen []string) string {
	votes := map[string]int{}
	for _, a := range chosen {
		if a != "" {
			votes[a]++
		}
	}
	best := ""
	for _, a := range configured {
		if votes[a] > votes[best] || best == "" && votes[a] > 0 {
			best = a
		}
	}
	if best == "" && len(configured) > 0 {
		best = configured[0]
	}
	return best
}

// TopicID is a topic's UUID, as ConsumerGroupHeartbeat names topics.
type TopicID = [16]byte

// Partitions is the partitions of each topic one member holds or is to hold, each slice
// sorted.
type Partitions map[TopicID][]int32

// Count is how many partitions a holds.
func (a Partitions) Count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Clone is a deep copy of a.
func (a Partitions) Clone() Partitions {
	out := make(Partitions, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

// Has reports whether a holds partition p of topic t.
func (a Partitions) Has(t TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

// Add puts partition p of topic t into a, keeping its slice sorted.
func (a Partitions) Add(t TopicID, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

// Remove takes partition p of topic t out of a, dropping a topic left empty.
func (a Partitions) Remove(t TopicID, p int32) {
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

// Minus is the partitions of a not in b.
func (a Partitions) Minus(b Partitions) Partitions {
	out := Partitions{}
	for t, ps := range a {
		for _, p := range ps {
			if !b.Has(t, p) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

// Intersect is the partitions in both a and b.
func (a Partitions) Intersect(b Partitions) Partitions {
	out := Partitions{}
	for t, ps := range a {
		for _, p := range ps {
			if b.Has(t, p) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

// Equal reports whether a and b hold the same partitions.
func (a Partitions) Equal(b Partitions) bool {
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

// Encode is a's stored form, as a consumer group's assignment records hold it: topic ids in
// hex. An empty a is nil (left out of the record).
func (a Partitions) Encode() map[string][]int32 {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string][]int32, len(a))
	for t, ps := range a {
		out[hex.EncodeToString(t[:])] = ps
	}
	return out
}

// Decode reads Encode's form back, each topic's partitions sorted.
func Decode(m map[string][]int32) (Partitions, error) {
	out := Partitions{}
	for k, ps := range m {
		var t TopicID
		if b, err := hex.DecodeString(k); err != nil || len(b) != 16 {
			return nil, fmt.Errorf("bad topic id %q", k)
		} else {
			copy(t[:], b)
		}
		out[t] = slices.Sorted(slices.Values(ps))
	}
	return out, nil
}

// Input is what an assignor works from: members in a fixed order, the topics each
// subscribes to (only topics that exist), every subscribed topic's partition count, and the
// previous target assignment (stickiness).
type Input struct {
	Members    []string
	Subscribed map[string][]TopicID // sorted
	Partitions map[TopicID]int32
	Previous   map[string]Partitions
}

type tp struct {
	t TopicID
	p int32
}

func tpLess(a, b tp) bool {
	if c := CompareTopicIDs(a.t, b.t); c != 0 {
		return c < 0
	}
	return a.p < b.p
}

// CompareTopicIDs orders topic ids bytewise (the assignors' and the answers' topic order).
func CompareTopicIDs(a, b TopicID) int {
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

// Uniform is the uniform assignor: every partition of a subscribed topic goes to one
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
func Uniform(in Input) map[string]Partitions {
	out := make(map[string]Partitions, len(in.Members))
	count := make(map[string]int, len(in.Members))
	subs := make(map[string]map[TopicID]bool, len(in.Members))
	for _, m := range in.Members {
		out[m] = Partitions{}
		subs[m] = map[TopicID]bool{}
		for _, t := range in.Subscribed[m] {
			subs[m][t] = true
		}
	}
	var all []tp
	subscribers := map[TopicID][]string{}
	for _, m := range in.Members {
		for _, t := range in.Subscribed[m] {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	for t := range subscribers {
		for p := int32(0); p < in.Partitions[t]; p++ {
			all = append(all, tp{t, p})
		}
	}
	sort.Slice(all, func(i, j int) bool { return tpLess(all[i], all[j]) })
	if len(in.Members) == 0 || len(all) == 0 {
		return out
	}
	ceiling := (len(all) + len(in.Members) - 1) / len(in.Members)
	taken := make(map[tp]bool, len(all))
	// (1) stickiness.
	for _, m := range in.Members {
		prev := in.Previous[m]
		var keep []tp
		for t, ps := range prev {
			if !subs[m][t] {
				continue
			}
			for _, p := range ps {
				if p < in.Partitions[t] {
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
			out[m].Add(x.t, x.p)
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
		out[best].Add(x.t, x.p)
		count[best]++
	}
	// (3) balance.
	for moves := 0; moves < len(all); moves++ {
		moved := false
		givers := slices.Clone(in.Members)
		sort.SliceStable(givers, func(i, j int) bool { return count[givers[i]] > count[givers[j]] })
	give:
		for _, from := range givers {
			ts := make([]TopicID, 0, len(out[from]))
			for t := range out[from] {
				ts = append(ts, t)
			}
			slices.SortFunc(ts, CompareTopicIDs)
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
				out[from].Remove(t, p)
				out[to].Add(t, p)
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

// Range is the range assignor (Kafka's RangeAssignor, as the classic client-side one):
// for each topic, its subscribers sorted by member id share its partitions in contiguous
// ranges, the first (partitions mod subscribers) getting one more. Members with the same
// subscriptions get the same partition numbers of co-partitioned topics.
func Range(in Input) map[string]Partitions {
	out := make(map[string]Partitions, len(in.Members))
	subscribers := map[TopicID][]string{}
	for _, m := range in.Members {
		out[m] = Partitions{}
		for _, t := range in.Subscribed[m] {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	for t, ms := range subscribers {
		ms = slices.Clone(ms)
		slices.Sort(ms)
		n := int(in.Partitions[t])
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
