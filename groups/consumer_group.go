package groups

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/groups/assign"
	"inlet/groups/validate"
	"inlet/meta"
	"inlet/wire"
)

// KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe, as Kafka 4's
// GroupMetadataManager, ConsumerGroup and CurrentAssignmentBuilder serve them.
//
// Three epochs drive a group:
//
//   - the group epoch rises whenever what the assignment depends on changes: a member joins
//     or leaves (or is fenced: session or rebalance timeout), a member's subscription or
//     assignor changes, a subscribed topic is created, deleted or grows;
//   - the target assignment (one per member) is computed by the group's assignor when the
//     group epoch is above the assignment epoch, which then takes the group epoch;
//   - each member's epoch follows the assignment epoch as the member reconciles: a member
//     whose target drops partitions it holds is first told to revoke them (its epoch does not
//     move: UNREVOKED_PARTITIONS) and, once a heartbeat shows them gone, gets its new
//     partitions and the assignment epoch. A partition still held by another member (being
//     revoked there) is not given out until that member releases it (UNRELEASED_PARTITIONS):
//     owners maps each partition to the one member holding it, so no partition is ever held
//     by two members at once.
//
// Heartbeats are routed on the member epoch: 0 joins (or rejoins), -1 leaves, -2 is a static
// member's temporary leave (it keeps its partitions until its session expires or its
// instance rejoins), anything else is a regular heartbeat whose epoch must be the member's
// (or its previous one, when the partitions it reports are a subset of what it holds: the
// member missed the answer that moved it on), else FENCED_MEMBER_EPOCH.
//
// Durability: every change of epochs, members, subscriptions or assignments is saved (one
// synced Pebble batch of the records it changed: the group's epochs, a member's subscription,
// a member's assignment; persistConsumer) before the heartbeat is answered, so a restart
// brings the group back as it was answered; members' sessions start again from the restart,
// as the classic groups'. Heartbeats that change nothing write nothing.
//
// Concurrency: everything here runs under the group's mutex (group.mu), as the classic
// protocol; timers take it and check that the member they were armed for is still there.

// ConsumerConfig is the KIP-848 part of the coordinator's settings (Kafka's broker configs of
// the same names).
type ConsumerConfig struct {
	// Enabled is whether group.coordinator.rebalance.protocols lists "consumer" (Kafka 4's
	// default: classic,consumer). Off, ConsumerGroupHeartbeat is refused UNSUPPORTED_VERSION.
	Enabled bool
	// SessionTimeout is group.consumer.session.timeout.ms (default 45 s).
	SessionTimeout time.Duration
	// HeartbeatInterval is group.consumer.heartbeat.interval.ms (default 5 s).
	HeartbeatInterval time.Duration
	// Assignors is group.consumer.assignors (default uniform,range): the first is the group's
	// when no member names one.
	Assignors []string
	// MaxSize is group.consumer.max.size: members a group holds; one more joining is
	// GROUP_MAX_SIZE_REACHED.
	MaxSize int
	// MaxMembersPerPrincipal bounds the members one principal holds over every group (0:
	// DefaultConsumerMaxMembersPerPrincipal, negative: none); MaxSubscribedTopics the names
	// one member subscribes to; MaxRegexes the distinct regular expressions of a group
	// (consumer_bounds.go).
	MaxMembersPerPrincipal, MaxSubscribedTopics, MaxRegexes int
	// Topics lists every topic (regular expression subscriptions); Topic looks one up by name.
	Topics func() []TopicMeta
	Topic  func(name string) (TopicMeta, bool)
}

// TopicMeta is what the assignment needs of a topic.
type TopicMeta struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// Defaults of the KIP-848 settings: Kafka's, except MaxSize, which Kafka leaves unbounded
// (Integer.MAX_VALUE): a member costs memory and a share of every assignment's CPU.
const (
	DefaultConsumerSessionTimeout    = 45 * time.Second
	DefaultConsumerHeartbeatInterval = 5 * time.Second
	DefaultConsumerMaxSize           = 1000
	// regexRefresh is how often a group's regular expressions are matched against the topics
	// again (Kafka 4 refreshes them at most every 10 s, and on topic changes: see
	// Coordinator.TopicsChanged).
	regexRefresh = 10 * time.Second
)

// topicsCounter counts topic changes (Coordinator.TopicsChanged).
type topicsCounter struct{ atomic.Uint64 }

// TopicsChanged tells the consumer groups that topics were created, deleted or grew: their
// subscribed topics are looked up and their regular expressions matched again at their next
// heartbeat (otherwise only within regexRefresh, or when a subscription changes), and a
// change of their topics raises their epoch. A nil coordinator (a
// server built without groups, in tests) ignores it.
func (c *Coordinator) TopicsChanged() {
	if c != nil {
		c.topicsGen.Add(1)
	}
}

// The assignors' names (package assign's), as members name them in ServerAssignor.
const (
	AssignorUniform = assign.UniformName
	AssignorRange   = assign.RangeName
)

// DefaultAssignors is group.consumer.assignors' default.
var DefaultAssignors = []string{AssignorUniform, AssignorRange}

// memberState is ConsumerGroupMember's MemberState.
type memberState int8

const (
	memberStable     memberState = iota // holds its target
	memberUnrevoked                     // asked to revoke partitions, not yet done
	memberUnreleased                    // waits for partitions others still hold
)

func (s memberState) String() string {
	switch s {
	case memberUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleased:
		return "UNRELEASED_PARTITIONS"
	}
	return "STABLE"
}

type consumerMember struct {
	id         string
	instanceID *string
	rackID     *string
	clientID   string
	clientHost string
	rebalance  time.Duration
	subscribed []string // topic names, sorted
	regex      string   // SubscribedTopicRegex ("" none)
	re         *regexp.Regexp
	assignor   string // ServerAssignor ("" none)
	principal  string // the principal whose heartbeat joined it (MaxMembersPerPrincipal)

	epoch, prevEpoch int32
	state            memberState
	assigned         assign.Partitions // what the member was told it holds
	revoking         assign.Partitions // what it was told to give up and has not yet

	// allowed is whether the member's principal may DESCRIBE a topic (its last heartbeat's):
	// topics its regular expression matches are kept to those. nil: any. known is false for
	// a member restored at start-up until it heartbeats: its regular expression is not
	// matched again before its principal is known.
	allowed func(topic string) bool
	known   bool
	// regexTopics is what re matched at the last refresh, filtered by allowed.
	regexTopics []string

	deadline       time.Time // session expiry, pushed by heartbeats
	timer          *time.Timer
	revokeDeadline time.Time // rebalance timeout of a revocation; zero: none pending
	revokeTimer    *time.Timer
}

// tp is one partition of a topic (consumerGroup.owners).
type tp struct {
	t assign.TopicID
	p int32
}

type consumerGroup struct {
	epoch       int32 // group epoch
	assignEpoch int32 // target assignment epoch
	members     map[string]*consumerMember
	static      map[string]string // instance id -> member id
	target      map[string]assign.Partitions
	owners      map[tp]string // partition -> the member holding it (assigned or revoking)
	// topics is the subscribed topics' metadata the target was computed from, by name.
	topics       map[string]TopicMeta
	assignorName string
	regexAt      time.Time // last regular expression refresh
	topicsGen    uint64    // Coordinator.topicsGen at that refresh
	// regexes is the group's distinct regular expressions (consumer_bounds.go); subsChanged
	// is set when a subscription changed since the topics were last looked up.
	regexes     map[string]*regexEntry
	subsChanged bool
	// stored is what the group's records hold (persistConsumer writes what differs).
	stored storedConsumer
	// tick anchors the group's heartbeat ticks (untilTick); zero until a stable member is
	// first answered. Not stored: after a restart the ticks start again from a new anchor.
	tick time.Time
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*consumerMember{}, static: map[string]string{},
		target: map[string]assign.Partitions{}, owners: map[tp]string{}, topics: map[string]TopicMeta{}}
}

// ConsumerHeartbeat is what the server passes with a ConsumerGroupHeartbeat besides the
// request: the client's id and host, and whether its principal may DESCRIBE a topic (nil:
// any), which keeps a regular expression to the topics the principal may see.
type ConsumerHeartbeat struct {
	ClientID, ClientHost string
	Allowed              func(topic string) bool
	// Principal is the request's principal (user, or ANONYMOUS): its members over every group
	// are bounded (ConsumerConfig.MaxMembersPerPrincipal).
	Principal string
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat (GroupMetadataManager.consumerGroupHeartbeat).
func (c *Coordinator) ConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, h ConsumerHeartbeat) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	cc := &c.cfg.Consumer
	resp.HeartbeatIntervalMillis = int32(cc.HeartbeatInterval.Milliseconds())
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if !cc.Enabled {
		return fail(wire.ErrUnsupportedVersion, "The new consumer group protocol is not enabled (group.coordinator.rebalance.protocols).")
	}
	if code, msg := validate.Heartbeat(req); code != wire.ErrNone {
		return fail(code, msg)
	}
	if code, msg := validate.Bounds(req, cc.MaxSubscribedTopics); code != wire.ErrNone {
		return fail(code, msg)
	}
	h.ClientID = wire.CleanString(h.ClientID, validate.MaxIDLength)
	g := c.get(req.Group, req.MemberEpoch == 0)
	if g == nil {
		if c.isClosed() {
			return fail(wire.ErrNotCoordinator, "")
		}
		if req.MemberEpoch == 0 && c.Full() {
			return fail(ErrGroupBound, "The node holds max.groups groups; no more can be created.")
		}
		// As GroupMetadataManager.getOrMaybeCreateConsumerGroup: only a join creates one.
		return fail(wire.ErrGroupIDNotFound, fmt.Sprintf("Consumer group %s not found.", req.Group))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Dead {
		return fail(wire.ErrCoordinatorNotAvailable, "")
	}
	if g.cg == nil {
		// A classic group becomes a consumer group only while it has no members (Kafka
		// converts an empty classic group; online migration of a group with members is not
		// done here).
		if len(g.members) > 0 || g.state != Empty {
			return fail(wire.ErrGroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", g.name))
		}
		if req.MemberEpoch != 0 {
			return fail(wire.ErrGroupIDNotFound, fmt.Sprintf("Consumer group %s not found.", g.name))
		}
		g.cg = newConsumerGroup()
		g.protocolType = "consumer"
	}
	var r *kmsg.ConsumerGroupHeartbeatResponse
	switch req.MemberEpoch {
	case 0:
		r = g.consumerJoin(req, h, resp)
	case -1:
		r = g.consumerLeave(req, resp, false)
	case -2:
		r = g.consumerLeave(req, resp, true)
	default:
		r = g.consumerBeat(req, h, resp)
	}
	if m := g.cg.members[derefOr(r.MemberID)]; r.ErrorCode == wire.ErrNone && m != nil && r.MemberEpoch >= 0 {
		if m.state != memberStable {
			r.HeartbeatIntervalMillis = int32(min(cc.HeartbeatInterval, reconcilingHeartbeatInterval).Milliseconds())
		} else {
			r.HeartbeatIntervalMillis = g.cg.untilTick(c.cfg.Now(), cc.HeartbeatInterval)
		}
	}
	return r
}

// untilTick is the heartbeat interval told to a stable member, in milliseconds: the time
// until the group's next tick. Ticks fall every interval from an anchor the group takes at
// its first stable answer, so every stable member heartbeats on the same tick. A member
// that must revoke partitions (after a member joins, say) learns it at its next heartbeat;
// with the members' heartbeats in step, all of them learn at the same tick, instead of the
// last of several members whose phases are spread over the interval (the expected last of
// three uniform phases is at 3/4 of the interval, against 1/2 for one common tick). Classic
// members are in step by themselves: their heartbeat timers restart together after each
// rebalance.
//
// A tick closer than floor (max(reconcilingHeartbeatInterval, interval/10)) is skipped for
// the one after it, so a member heartbeats about once per interval on average, never waits
// more than interval+floor (far inside the session timeout), and is never told less than
// half a second (librdkafka takes the interval as the heartbeat's request timeout). The
// result is rounded up to the millisecond, so a member lands just after the tick, not just
// before it. Intervals of floor or less are answered as configured.
func (cg *consumerGroup) untilTick(now time.Time, interval time.Duration) int32 {
	floor := max(reconcilingHeartbeatInterval, interval/10)
	if interval <= floor {
		return int32(interval.Milliseconds())
	}
	since := now.Sub(cg.tick)
	if cg.tick.IsZero() || since < 0 {
		cg.tick, since = now, 0
	}
	wait := interval - since%interval // (0, interval]
	if wait < floor {
		wait += interval
	}
	return int32((wait + time.Millisecond - 1) / time.Millisecond)
}

// reconcilingHeartbeatInterval is the heartbeat interval told to a member that is not yet at
// its target: one asked to revoke partitions, or one waiting for partitions that others
// still hold (UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS). The interval is per response
// (franz-go, librdkafka and the Java client take each response's), so such a member comes
// back within half a second and gets what was released then, instead of a whole
// group.consumer.heartbeat.interval.ms later.
// Kafka's coordinator always answers the configured one, which makes a joining member wait
// up to two intervals: one for the others to learn of their revocations, one more for its
// own next heartbeat. librdkafka also takes the interval as the heartbeat's request timeout,
// hence half a second rather than less. Stable members are told the time until the group's
// next tick (untilTick).
const reconcilingHeartbeatInterval = 500 * time.Millisecond

func (g *group) validAssignor(name *string) bool {
	return name == nil || slices.Contains(g.c.cfg.Consumer.Assignors, *name)
}

// consumerJoin handles member epoch 0: a new member, a static member replacing its previous
// instance, or a member rejoining (after being fenced, or to start over).
func (g *group) consumerJoin(req *kmsg.ConsumerGroupHeartbeatRequest, h ConsumerHeartbeat, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	cg := g.cg
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if !g.validAssignor(req.ServerAssignor) {
		return fail(wire.ErrUnsupportedAssignor, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %v.", *req.ServerAssignor, g.c.cfg.Consumer.Assignors))
	}
	var re *regexEntry
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var code int16
		var msg string
		if re, code, msg = g.regexFor(*req.SubscribedTopicRegex, ""); code != wire.ErrNone {
			return fail(code, msg)
		}
	}
	id := req.MemberID
	if id == "" { // v0: the coordinator names the member
		id = newMemberID(h.ClientID)
	}
	var inherit *consumerMember
	if req.InstanceID != nil {
		if old := cg.static[*req.InstanceID]; old != "" && old != id {
			prev := cg.members[old]
			if prev != nil && prev.epoch != -2 {
				return fail(wire.ErrUnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s is not released.", old, *req.InstanceID))
			}
			inherit = prev
		}
	}
	if prev := cg.members[id]; prev != nil {
		if prev.epoch == -2 && prev.instanceID != nil {
			inherit = prev
		} else {
			// A member joining again under its id (fenced, or starting over) comes back
			// empty-handed: it said so (TopicPartitions must be empty), so what it held is
			// released.
			g.removeConsumer(prev)
		}
	}
	if inherit == nil && len(cg.members) >= g.c.cfg.Consumer.MaxSize {
		return fail(wire.ErrGroupMaxSizeReached, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", g.c.cfg.Consumer.MaxSize))
	}
	if inherit != nil && inherit.principal == h.Principal {
		g.c.countMember(h.Principal) // a static member's new instance takes its place
	} else if !g.c.admitMember(h.Principal) {
		return fail(wire.ErrGroupMaxSizeReached, fmt.Sprintf("The principal holds %d members of consumer groups, the most it may.", g.c.cfg.Consumer.MaxMembersPerPrincipal))
	}
	m := &consumerMember{id: id, principal: h.Principal, instanceID: req.InstanceID, rackID: req.RackID, clientID: h.ClientID, clientHost: h.ClientHost,
		rebalance: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond, assignor: derefOr(req.ServerAssignor),
		assigned: assign.Partitions{}, revoking: assign.Partitions{}, allowed: h.Allowed, known: true}
	if m.rebalance <= 0 {
		m.rebalance = g.c.cfg.Consumer.SessionTimeout
	}
	m.subscribed = sortedNames(req.SubscribedTopicNames)
	if re != nil {
		g.useRegex(m, *req.SubscribedTopicRegex, re)
	}
	cg.subsChanged = true
	if inherit != nil {
		// The new instance takes over what the old one held (ConsumerGroup's static member
		// replacement): its epoch, partitions and target, under the new member id.
		m.epoch, m.prevEpoch, m.state = inherit.prevEpoch, inherit.prevEpoch, inherit.state
		m.assigned, m.revoking = inherit.assigned, inherit.revoking
		target := cg.target[inherit.id]
		g.detachConsumer(inherit)
		cg.target[id] = target
		for x, owner := range cg.owners {
			if owner == inherit.id {
				cg.owners[x] = id
			}
		}
	}
	cg.members[id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = id
	}
	g.startConsumerSession(m)
	// A new member raises the epoch; a static member replacing itself only if what the
	// assignment depends on changed.
	if g.refreshTopics(false) || inherit == nil ||
		!slices.Equal(inherit.subscribed, m.subscribed) || inherit.regex != m.regex || inherit.assignor != m.assignor {
		cg.epoch++
	}
	g.refreshTarget()
	g.reconcile(m, nil)
	g.syncState()
	g.persist()
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	resp.Assignment = heartbeatAssignment(m.assigned)
	return resp
}

// consumerLeave handles member epoch -1 (leave) and -2 (a static member's temporary leave:
// it stays, with its partitions, until its instance rejoins or its session expires).
func (g *group) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, static bool) *kmsg.ConsumerGroupHeartbeatResponse {
	cg := g.cg
	m := cg.members[req.MemberID]
	if m == nil && req.InstanceID != nil {
		m = cg.members[cg.static[*req.InstanceID]]
		if m != nil && m.id != req.MemberID {
			resp.ErrorCode = wire.ErrFencedInstanceID
			return resp
		}
	}
	if m == nil {
		resp.ErrorCode = wire.ErrUnknownMemberID
		return resp
	}
	resp.MemberID = &m.id
	if static && m.instanceID != nil {
		// Its revocations are moot: it holds what it was last told until it comes back.
		g.releaseRevoking(m)
		m.prevEpoch = m.epoch
		m.epoch = -2
		resp.MemberEpoch = -2
		g.persist()
		return resp
	}
	g.removeConsumer(m)
	cg.epoch++
	g.refreshTarget()
	g.syncState()
	g.persist()
	resp.MemberEpoch = -1
	return resp
}

// consumerBeat is a regular heartbeat.
func (g *group) consumerBeat(req *kmsg.ConsumerGroupHeartbeatRequest, h ConsumerHeartbeat, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	cg := g.cg
	m := cg.members[req.MemberID]
	if m == nil {
		if req.InstanceID != nil && cg.static[*req.InstanceID] != "" {
			resp.ErrorCode = wire.ErrFencedInstanceID
			return resp
		}
		resp.ErrorCode = wire.ErrUnknownMemberID
		return resp
	}
	if req.InstanceID != nil && (m.instanceID == nil || *m.instanceID != *req.InstanceID) {
		resp.ErrorCode = wire.ErrFencedInstanceID
		return resp
	}
	var owned assign.Partitions
	if req.Topics != nil {
		owned = assign.Partitions{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				owned.Add(t.TopicID, p)
			}
		}
	}
	// throwIfMemberEpochIsInvalid: a later epoch than the member's is fenced; an earlier one
	// is taken only if it is the member's previous epoch and what it reports owning is a
	// subset of what it holds (it missed the answer that moved it on).
	if req.MemberEpoch != m.epoch {
		if req.MemberEpoch > m.epoch || req.MemberEpoch != m.prevEpoch || owned == nil || owned.Minus(m.assigned).Count() > 0 {
			resp.ErrorCode = wire.ErrFencedMemberEpoch
			return resp
		}
	}
	m.deadline = time.Now().Add(g.c.cfg.Consumer.SessionTimeout)
	m.allowed, m.known = h.Allowed, true
	changed := false
	if req.SubscribedTopicNames != nil {
		if s := sortedNames(req.SubscribedTopicNames); !slices.Equal(s, m.subscribed) {
			m.subscribed, changed = s, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		var re *regexEntry
		if *req.SubscribedTopicRegex != "" {
			var code int16
			var msg string
			if re, code, msg = g.regexFor(*req.SubscribedTopicRegex, m.regex); code != wire.ErrNone {
				resp.ErrorCode, resp.ErrorMessage = code, &msg
				return resp
			}
		}
		g.useRegex(m, *req.SubscribedTopicRegex, re)
		changed = true
	}
	if changed {
		cg.subsChanged = true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		if !g.validAssignor(req.ServerAssignor) {
			resp.ErrorCode = wire.ErrUnsupportedAssignor
			return resp
		}
		m.assignor, changed = *req.ServerAssignor, true
	}
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if g.refreshTopics(false) || changed {
		cg.epoch++
		changed = true
	}
	g.refreshTarget()
	before := struct {
		epoch    int32
		state    memberState
		assigned assign.Partitions
		revoking int
	}{m.epoch, m.state, m.assigned, m.revoking.Count()}
	g.reconcile(m, owned)
	moved := m.epoch != before.epoch || m.state != before.state || !m.assigned.Equal(before.assigned) || m.revoking.Count() != before.revoking
	if changed || moved {
		g.syncState()
		g.persist()
	}
	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	// The assignment goes back when it changed, or when the member reported what it owns
	// and that is not it.
	if moved || (owned != nil && !owned.Equal(m.assigned)) {
		resp.Assignment = heartbeatAssignment(m.assigned)
	}
	return resp
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedNames(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

func heartbeatAssignment(a assign.Partitions) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
	out.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	ids := slices.SortedFunc(maps.Keys(a), assign.CompareTopicIDs)
	for _, t := range ids {
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID, at.Partitions = t, slices.Clone(a[t])
		out.Topics = append(out.Topics, at)
	}
	return out
}

// matchRegex lists the topics m's regular expression matches that its principal may see
// (the group's entry matches them once for every member using it: regexMatches).
func (g *group) matchRegex(m *consumerMember) []string {
	if m.re == nil {
		return nil
	}
	var out []string
	for _, t := range g.regexMatches(m) {
		if m.allowed == nil || m.allowed(t) {
			out = append(out, t)
		}
	}
	return out
}

// refreshTopics looks up the subscribed topics again (and, every regexRefresh or after a
// topic change, matches the regular expressions again): a topic created, deleted or grown
// raises the group epoch (the caller's, once with its own reasons). force refreshes the
// regular expressions now. It reports whether the topics changed.
func (g *group) refreshTopics(force bool) bool {
	cg, cc := g.cg, &g.c.cfg.Consumer
	now := time.Now()
	gen := g.c.topicsGen.Load()
	if !force && !cg.subsChanged && gen == cg.topicsGen && now.Sub(cg.regexAt) < regexRefresh {
		// Nothing the topics depend on moved: no lookups (consumer_bounds.go).
		return false
	}
	cg.subsChanged = false
	if force || gen != cg.topicsGen || now.Sub(cg.regexAt) >= regexRefresh {
		cg.topicsGen, cg.regexAt = gen, now
		for _, m := range cg.members {
			if m.re != nil && m.known {
				m.regexTopics = g.matchRegex(m)
			}
		}
	}
	names := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.subscribed {
			names[t] = true
		}
		for _, t := range m.regexTopics {
			names[t] = true
		}
	}
	topics := make(map[string]TopicMeta, len(names))
	for n := range names {
		if cc.Topic == nil {
			continue
		}
		if t, ok := cc.Topic(n); ok {
			topics[n] = t
		}
	}
	if maps.Equal(topics, cg.topics) {
		return false
	}
	cg.topics = topics
	return true
}

// refreshTarget computes the target assignment if the group epoch moved past it.
func (g *group) refreshTarget() {
	cg := g.cg
	if cg.epoch <= cg.assignEpoch && len(cg.target) == len(cg.members) {
		return
	}
	in := assign.Input{Subscribed: map[string][]assign.TopicID{}, Partitions: map[assign.TopicID]int32{}, Previous: cg.target}
	in.Members = slices.Sorted(maps.Keys(cg.members))
	for _, id := range in.Members {
		m := cg.members[id]
		seen := map[assign.TopicID]bool{}
		for _, list := range [][]string{m.subscribed, m.regexTopics} {
			for _, n := range list {
				if t, ok := cg.topics[n]; ok && !seen[t.ID] {
					seen[t.ID] = true
					in.Subscribed[id] = append(in.Subscribed[id], t.ID)
					in.Partitions[t.ID] = t.Partitions
				}
			}
		}
		slices.SortFunc(in.Subscribed[id], assign.CompareTopicIDs)
	}
	cg.assignorName = g.preferredAssignor()
	cg.target = assign.ByName(cg.assignorName, in)
	cg.assignEpoch = cg.epoch
}

// preferredAssignor is the assignor the members' choices make the group's (assign.Preferred).
func (g *group) preferredAssignor() string {
	chosen := make([]string, 0, len(g.cg.members))
	for _, m := range g.cg.members {
		chosen = append(chosen, m.assignor)
	}
	return assign.Preferred(g.c.cfg.Consumer.Assignors, chosen)
}

// reconcile moves m towards its target (CurrentAssignmentBuilder). owned is what the member
// reported holding (nil: not reported).
func (g *group) reconcile(m *consumerMember, owned assign.Partitions) {
	cg := g.cg
	if m.epoch == -2 {
		return
	}
	switch m.state {
	case memberStable:
		if m.epoch == cg.assignEpoch {
			return
		}
	case memberUnrevoked:
		// Still holding something it was told to revoke (or not saying): wait.
		if owned == nil || owned.Intersect(m.revoking).Count() > 0 {
			return
		}
		g.releaseRevoking(m)
	}
	target := cg.target[m.id]
	keep := m.assigned.Intersect(target)
	revoke := m.assigned.Minus(target)
	if revoke.Count() > 0 {
		// Revoke first; the epoch stays until the member confirms.
		m.assigned, m.revoking, m.state = keep, revoke, memberUnrevoked
		g.armRevocation(m)
		return
	}
	unreleased := false
	for t, ps := range target.Minus(m.assigned) {
		for _, p := range ps {
			switch owner := cg.owners[tp{t, p}]; owner {
			case "", m.id:
				cg.owners[tp{t, p}] = m.id
				keep.Add(t, p)
			default:
				unreleased = true
			}
		}
	}
	m.assigned = keep
	m.state = memberStable
	if unreleased {
		m.state = memberUnreleased
	}
	if m.epoch != cg.assignEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignEpoch
	}
	g.disarmRevocation(m)
}

// releaseRevoking frees the partitions m was revoking.
func (g *group) releaseRevoking(m *consumerMember) {
	for t, ps := range m.revoking {
		for _, p := range ps {
			if g.cg.owners[tp{t, p}] == m.id {
				delete(g.cg.owners, tp{t, p})
			}
		}
	}
	m.revoking = assign.Partitions{}
	if m.state == memberUnrevoked {
		m.state = memberStable
	}
	g.disarmRevocation(m)
}

// removeConsumer takes m out of the group, freeing every partition it holds. The caller
// raises the group epoch.
func (g *group) removeConsumer(m *consumerMember) {
	for x, owner := range g.cg.owners {
		if owner == m.id {
			delete(g.cg.owners, x)
		}
	}
	g.detachConsumer(m)
}

// detachConsumer forgets m (its timers, its static instance, its target) without touching
// the partitions it holds.
func (g *group) detachConsumer(m *consumerMember) {
	cg := g.cg
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	g.releaseRegex(m.regex)
	g.c.releaseMember(m.principal)
	cg.subsChanged = true
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	if m.revokeTimer != nil {
		m.revokeTimer.Stop()
	}
}

// startConsumerSession arms m's session expiry; heartbeats push m.deadline and the timer
// re-arms itself until the deadline really passes (as the classic members').
func (g *group) startConsumerSession(m *consumerMember) {
	d := g.c.cfg.Consumer.SessionTimeout
	m.deadline = time.Now().Add(d)
	m.timer = time.AfterFunc(d, func() { g.checkConsumerSession(m) })
}

func (g *group) checkConsumerSession(m *consumerMember) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg == nil || g.cg.members[m.id] != m || g.c.isClosed() {
		return
	}
	if left := time.Until(m.deadline); left > 0 {
		m.timer = time.AfterFunc(left, func() { g.checkConsumerSession(m) })
		return
	}
	g.fenceConsumer(m)
}

// armRevocation starts m's rebalance timeout: a member that has not revoked by then is
// fenced (Kafka's consumer group rebalance timeout).
func (g *group) armRevocation(m *consumerMember) {
	if !m.revokeDeadline.IsZero() {
		return
	}
	m.revokeDeadline = time.Now().Add(m.rebalance)
	deadline := m.revokeDeadline
	m.revokeTimer = time.AfterFunc(m.rebalance, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.cg == nil || g.cg.members[m.id] != m || g.c.isClosed() || !m.revokeDeadline.Equal(deadline) {
			return
		}
		g.fenceConsumer(m)
	})
}

func (g *group) disarmRevocation(m *consumerMember) {
	m.revokeDeadline = time.Time{}
	if m.revokeTimer != nil {
		m.revokeTimer.Stop()
		m.revokeTimer = nil
	}
}

// fenceConsumer removes a member whose session or rebalance timeout passed.
func (g *group) fenceConsumer(m *consumerMember) {
	g.c.log.Info("groups: consumer group member fenced", "group", g.name, "member", m.id)
	g.removeConsumer(m)
	g.cg.epoch++
	g.refreshTarget()
	g.syncState()
	g.persist()
}

// syncState keeps the classic state field true for a consumer group (Empty or not), which
// the paths both kinds share read (DeleteGroups, expiry).
func (g *group) syncState() {
	if len(g.cg.members) == 0 {
		if g.state != Empty {
			g.state, g.stateMs = Empty, g.c.cfg.Now().UnixMilli()
		}
		return
	}
	g.state = Stable
}

// consumerStateName is ConsumerGroup.state's name: Empty, Assigning (the target is behind
// the group epoch), Reconciling (a member is behind the target), Stable.
func (cg *consumerGroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.assignEpoch < cg.epoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != -2 && (m.epoch != cg.assignEpoch || m.state != memberStable) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// subscribedTopics is every topic a member subscribes to (offset expiry and OffsetDelete keep
// their offsets).
func (cg *consumerGroup) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.subscribed {
			out[t] = true
		}
		for _, t := range m.regexTopics {
			out[t] = true
		}
	}
	return out
}

func (cc *ConsumerConfig) setDefaults() {
	if cc.SessionTimeout <= 0 {
		cc.SessionTimeout = DefaultConsumerSessionTimeout
	}
	if cc.HeartbeatInterval <= 0 {
		cc.HeartbeatInterval = DefaultConsumerHeartbeatInterval
	}
	if len(cc.Assignors) == 0 {
		cc.Assignors = DefaultAssignors
	}
	if cc.MaxSize <= 0 {
		cc.MaxSize = DefaultConsumerMaxSize
	}
	cc.setBoundDefaults()
}

// ---- offsets ----

// consumerCommitAllowed is ConsumerGroup.validateOffsetCommit: a member of the group commits
// with its current epoch; an earlier one is STALE_MEMBER_EPOCH, a later one
// FENCED_MEMBER_EPOCH. A commit with a negative epoch is taken while the group has no
// members. Members must use OffsetCommit v9+ outside transactions.
func (g *group) consumerCommitAllowed(memberID string, epoch int32, version int16, txn bool) int16 {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return wire.ErrNone
	}
	m := cg.members[memberID]
	if m == nil {
		return wire.ErrUnknownMemberID
	}
	if !txn && version < 9 {
		return wire.ErrUnsupportedVersion
	}
	return memberEpochCheck(epoch, m.epoch)
}

func memberEpochCheck(got, want int32) int16 {
	switch {
	case got > want:
		return wire.ErrFencedMemberEpoch
	case got < want:
		return wire.ErrStaleMemberEpoch
	}
	return wire.ErrNone
}

// CheckOffsetFetch is ConsumerGroup.validateOffsetFetch for OffsetFetch v9+: a request naming
// a member (or a non-negative epoch) of a consumer group must name a member and its epoch.
// Classic groups and requests without a member (admin tools) pass.
func (c *Coordinator) CheckOffsetFetch(name string, memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return wire.ErrNone
	}
	g := c.get(name, false)
	if g == nil {
		return wire.ErrNone
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg == nil {
		return wire.ErrNone
	}
	var m *consumerMember
	if memberID != nil {
		m = g.cg.members[*memberID]
	}
	if m == nil {
		return wire.ErrUnknownMemberID
	}
	return memberEpochCheck(epoch, m.epoch)
}

// ---- ConsumerGroupDescribe ----

// ConsumerDescription is one group of a ConsumerGroupDescribe, with the names of the topics
// it shows (the server checks that the principal may describe them).
type ConsumerDescription struct {
	Group  kmsg.ConsumerGroupDescribeResponseGroup
	Topics []string
}

// DescribeConsumer fills one ConsumerGroupDescribe entry (ConsumerGroup.asDescribedGroup).
func (c *Coordinator) DescribeConsumer(name string) ConsumerDescription {
	dg := kmsg.NewConsumerGroupDescribeResponseGroup()
	dg.Group = name
	dg.AuthorizedOperations = -2147483648
	var d ConsumerDescription
	g := c.get(name, false)
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
	}
	switch {
	case g == nil || g.state == Dead:
		dg.ErrorCode = wire.ErrGroupIDNotFound
		msg := fmt.Sprintf("Group %s not found.", name)
		dg.ErrorMessage = &msg
		d.Group = dg
		return d
	case g.cg == nil:
		dg.ErrorCode = wire.ErrGroupIDNotFound
		msg := fmt.Sprintf("Group %s is not a consumer group.", name)
		dg.ErrorMessage = &msg
		d.Group = dg
		return d
	}
	cg := g.cg
	dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = cg.stateName(), cg.epoch, cg.assignEpoch, cg.assignorName
	if dg.AssignorName == "" {
		dg.AssignorName = g.preferredAssignor()
	}
	byID := map[assign.TopicID]string{}
	for _, t := range cg.topics {
		byID[t.ID] = t.Name
	}
	seen := map[string]bool{}
	describe := func(a assign.Partitions) kmsg.Assignment {
		out := kmsg.NewAssignment()
		out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
		for _, t := range slices.SortedFunc(maps.Keys(a), assign.CompareTopicIDs) {
			atp := kmsg.NewAssignmentTopicPartition()
			atp.TopicID, atp.Topic, atp.Partitions = t, byID[t], slices.Clone(a[t])
			seen[atp.Topic] = true
			out.TopicPartitions = append(out.TopicPartitions, atp)
		}
		return out
	}
	for _, id := range slices.Sorted(maps.Keys(cg.members)) {
		m := cg.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = slices.Clone(m.subscribed)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		for _, t := range m.subscribed {
			seen[t] = true
		}
		if m.regex != "" {
			r := m.regex
			dm.SubscribedTopicRegex = &r
		}
		held := m.assigned.Clone()
		for t, ps := range m.revoking {
			for _, p := range ps {
				held.Add(t, p)
			}
		}
		dm.Assignment = describe(held)
		dm.TargetAssignment = describe(cg.target[id])
		dm.MemberType = 1 // consumer (KIP-1099): every member here speaks the new protocol
		dg.Members = append(dg.Members, dm)
	}
	d.Group = dg
	delete(seen, "")
	d.Topics = slices.Sorted(maps.Keys(seen))
	return d
}

// ---- durability ----

// A consumer group is stored as Kafka stores one (meta's consumer_groups.go has the keys): a
// group-level record (consumerRecord: epochs, assignor), the subscribed topics' record, and,
// per member, a metadata record (memberMetaRecord: its subscription, client, rebalance
// timeout) and an assignment record (memberAssignmentRecord: its epochs, the partitions it
// holds and revokes, its target). persistConsumer compares the group with what its records
// hold (storedConsumer) and writes only the records that differ, with those of members gone
// removed, in one synced batch: a heartbeat that moves a member's epoch writes that member's
// assignment record, a join the new member's two records and the group's epochs, and no
// change writes another member's subscription, the bulk of a group's bytes (up to
// MaxSubscribedTopics names of 249 bytes a member). A rebalance writes the assignment
// records of the members whose target or partitions it changes. A group stored by an
// earlier release holds everything in its group-level record (consumerRecord.Members): it is
// read as it is and stored in the new layout by its next write.

// consumerRecord is a consumer group's group-level record (meta.GroupRecord.Consumer, JSON),
// topics by their UUID in hex.
type consumerRecord struct {
	Epoch       int32  `json:"epoch"`
	AssignEpoch int32  `json:"assign_epoch"`
	Assignor    string `json:"assignor,omitempty"`
	// PerMember says the topics and members are in their own records; a record without it
	// (an earlier release's) holds them in Topics and Members.
	PerMember bool                   `json:"per_member,omitempty"`
	Topics    []consumerTopicRecord  `json:"topics,omitempty"`
	Members   []consumerMemberRecord `json:"members,omitempty"`
}

type consumerTopicRecord struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Partitions int32  `json:"partitions"`
}

// consumerMemberRecord is a member as an earlier release's group-level record holds it: its
// two records' fields in one object.
type consumerMemberRecord struct {
	ID string `json:"id"`
	memberMetaRecord
	memberAssignmentRecord
}

// memberMetaRecord is a member's metadata record (Kafka's ConsumerGroupMemberMetadataValue),
// written when its subscription, rebalance timeout or assignor changes.
type memberMetaRecord struct {
	InstanceID  *string  `json:"instance_id,omitempty"`
	RackID      *string  `json:"rack_id,omitempty"`
	ClientID    string   `json:"client_id"`
	ClientHost  string   `json:"client_host"`
	RebalanceMs int64    `json:"rebalance_ms"`
	Subscribed  []string `json:"subscribed,omitempty"`
	Regex       string   `json:"regex,omitempty"`
	RegexTopics []string `json:"regex_topics,omitempty"`
	Assignor    string   `json:"assignor,omitempty"`
	Principal   string   `json:"principal,omitempty"`
}

// memberAssignmentRecord is a member's assignment record (Kafka's
// ConsumerGroupCurrentMemberAssignmentValue and ConsumerGroupTargetAssignmentMemberValue in
// one), written when its epochs, partitions or target change.
type memberAssignmentRecord struct {
	Epoch     int32              `json:"epoch"`
	PrevEpoch int32              `json:"prev_epoch"`
	State     int8               `json:"state"`
	Assigned  map[string][]int32 `json:"assigned,omitempty"`
	Revoking  map[string][]int32 `json:"revoking,omitempty"`
	Target    map[string][]int32 `json:"target,omitempty"`
}

// storedConsumer is what a consumer group's records hold after its last successful write
// (or as its restore found them). Zero, for a new group or one restored from an earlier
// release's record, the next write writes every record.
type storedConsumer struct {
	written bool                 // group and topics are what the records hold
	group   consumerLevel        // the group-level record
	topics  map[string]TopicMeta // cg.topics as written (replaced, never changed in place)
	members map[string]*storedMember
}

// consumerLevel is what the group-level record holds.
type consumerLevel struct {
	epoch, assignEpoch int32
	assignor           string
	stateMs            int64 // 0 while the group has members
}

// storedMember is what a member's two records hold. meta shares the member's subscribed and
// regexTopics slices, which are replaced, never changed in place (so an unchanged
// subscription compares in one step); the assignments are copies.
type storedMember struct {
	meta                       memberMetaRecord
	epoch, prevEpoch           int32
	state                      memberState
	assigned, revoking, target assign.Partitions
}

func memberMeta(m *consumerMember) memberMetaRecord {
	return memberMetaRecord{InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		RebalanceMs: m.rebalance.Milliseconds(), Subscribed: m.subscribed, Regex: m.regex, RegexTopics: m.regexTopics,
		Assignor: m.assignor, Principal: m.principal}
}

func (a *memberMetaRecord) equal(b *memberMetaRecord) bool {
	return equalPtr(a.InstanceID, b.InstanceID) && equalPtr(a.RackID, b.RackID) && a.ClientID == b.ClientID &&
		a.ClientHost == b.ClientHost && a.RebalanceMs == b.RebalanceMs && sameNames(a.Subscribed, b.Subscribed) &&
		a.Regex == b.Regex && sameNames(a.RegexTopics, b.RegexTopics) && a.Assignor == b.Assignor && a.Principal == b.Principal
}

func equalPtr(a, b *string) bool { return a == b || a != nil && b != nil && *a == *b }

// sameNames compares two name lists, the same slice in one step.
func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

func snapshotMember(m *consumerMember, target assign.Partitions) *storedMember {
	return &storedMember{meta: memberMeta(m), epoch: m.epoch, prevEpoch: m.prevEpoch, state: m.state,
		assigned: m.assigned.Clone(), revoking: m.revoking.Clone(), target: target.Clone()}
}

func (s *storedMember) assignmentIs(m *consumerMember, target assign.Partitions) bool {
	return s.epoch == m.epoch && s.prevEpoch == m.prevEpoch && s.state == m.state &&
		s.assigned.Equal(m.assigned) && s.revoking.Equal(m.revoking) && s.target.Equal(target)
}

// persistConsumer writes what changed in the group since its last write (storedConsumer),
// in one synced batch; nothing when nothing did. A failed write leaves storedConsumer as it
// was, so the next one writes this change too.
func (g *group) persistConsumer() {
	cg := g.cg
	st := &cg.stored
	lvl := consumerLevel{epoch: cg.epoch, assignEpoch: cg.assignEpoch, assignor: cg.assignorName}
	if len(cg.members) == 0 {
		lvl.stateMs = g.stateMs // when it emptied; otherwise a restart empties it (New)
	}
	var w meta.ConsumerGroupWrite
	if !st.written || st.group != lvl {
		raw := mustJSON(consumerRecord{Epoch: cg.epoch, AssignEpoch: cg.assignEpoch, Assignor: cg.assignorName, PerMember: true})
		w.Record = &meta.GroupRecord{ProtocolType: "consumer", Generation: cg.epoch, StateMs: lvl.stateMs, Consumer: raw}
	}
	if !st.written || !maps.Equal(st.topics, cg.topics) {
		if len(cg.topics) == 0 {
			w.DropTopics = true
		} else {
			var topics []consumerTopicRecord
			for _, n := range slices.Sorted(maps.Keys(cg.topics)) {
				t := cg.topics[n]
				topics = append(topics, consumerTopicRecord{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Partitions: t.Partitions})
			}
			w.Topics = mustJSON(topics)
		}
	}
	var changed []string
	for id, m := range cg.members {
		prev, target := st.members[id], cg.target[id]
		mr := memberMeta(m)
		metaChanged := prev == nil || !prev.meta.equal(&mr)
		asgChanged := prev == nil || !prev.assignmentIs(m, target)
		if metaChanged {
			if w.Subscriptions == nil {
				w.Subscriptions = map[string][]byte{}
			}
			w.Subscriptions[id] = mustJSON(mr)
		}
		if asgChanged {
			if w.Assignments == nil {
				w.Assignments = map[string][]byte{}
			}
			w.Assignments[id] = mustJSON(memberAssignmentRecord{Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: int8(m.state),
				Assigned: m.assigned.Encode(), Revoking: m.revoking.Encode(), Target: target.Encode()})
		}
		if metaChanged || asgChanged {
			changed = append(changed, id)
		}
	}
	for id := range st.members {
		if cg.members[id] == nil {
			w.Deleted = append(w.Deleted, id)
		}
	}
	if w.Empty() {
		return
	}
	if err := g.c.store.SaveConsumerGroup(g.name, w); err != nil {
		g.c.log.Error("groups: save group", "group", g.name, "err", err)
		return
	}
	st.written, st.group, st.topics = true, lvl, cg.topics
	if st.members == nil {
		st.members = map[string]*storedMember{}
	}
	for _, id := range w.Deleted {
		delete(st.members, id)
	}
	for _, id := range changed {
		st.members[id] = snapshotMember(cg.members[id], cg.target[id])
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("BUG: groups: consumer group record does not encode: " + err.Error())
	}
	return b
}

// restoreConsumer brings a consumer group back from its records at start-up (or from an
// earlier release's single record); each member's session starts now. A group-level record
// that does not decode leaves the group Empty, a member's that does not leaves it out
// (logged); the records left out are removed by the group's next write.
func (g *group) restoreConsumer(sg *meta.StoredGroup) {
	var rec consumerRecord
	cg := newConsumerGroup()
	g.cg = cg
	g.protocolType = "consumer"
	defer func() {
		for id := range sg.ConsumerMembers {
			if cg.members[id] == nil {
				if cg.stored.members == nil {
					cg.stored.members = map[string]*storedMember{}
				}
				cg.stored.members[id] = &storedMember{} // not a member: its records go
			}
		}
	}()
	if err := json.Unmarshal(sg.Record.Consumer, &rec); err != nil {
		g.c.log.Error("groups: consumer group record does not decode", "group", g.name, "err", err)
		return
	}
	cg.epoch, cg.assignEpoch, cg.assignorName = rec.Epoch, rec.AssignEpoch, rec.Assignor
	if rec.PerMember {
		rec.Topics, rec.Members = nil, nil
		if sg.ConsumerTopics != nil {
			if err := json.Unmarshal(sg.ConsumerTopics, &rec.Topics); err != nil {
				g.c.log.Error("groups: consumer group topics record does not decode", "group", g.name, "err", err)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(sg.ConsumerMembers)) {
			sm := sg.ConsumerMembers[id]
			mr := consumerMemberRecord{ID: id}
			err := errors.New("a record is missing")
			if sm.Subscription != nil && sm.Assignment != nil {
				if err = json.Unmarshal(sm.Subscription, &mr.memberMetaRecord); err == nil {
					err = json.Unmarshal(sm.Assignment, &mr.memberAssignmentRecord)
				}
			}
			if err != nil {
				g.c.log.Error("groups: consumer group member record does not decode", "group", g.name, "member", id, "err", err)
				continue
			}
			rec.Members = append(rec.Members, mr)
		}
	}
	for _, t := range rec.Topics {
		var id assign.TopicID
		b, err := hex.DecodeString(t.ID)
		if err != nil || len(b) != 16 {
			continue
		}
		copy(id[:], b)
		cg.topics[t.Name] = TopicMeta{Name: t.Name, ID: id, Partitions: t.Partitions}
	}
	for _, mr := range rec.Members {
		m := &consumerMember{id: mr.ID, instanceID: mr.InstanceID, rackID: mr.RackID, clientID: mr.ClientID, clientHost: mr.ClientHost,
			rebalance: time.Duration(mr.RebalanceMs) * time.Millisecond, subscribed: mr.Subscribed, regex: mr.Regex,
			regexTopics: mr.RegexTopics, assignor: mr.Assignor, principal: mr.Principal, epoch: mr.Epoch, prevEpoch: mr.PrevEpoch, state: memberState(mr.State)}
		var err error
		if m.assigned, err = assign.Decode(mr.Assigned); err == nil {
			if m.revoking, err = assign.Decode(mr.Revoking); err == nil {
				cg.target[m.id], err = assign.Decode(mr.Target)
			}
		}
		var re *regexEntry
		if m.regex != "" && err == nil {
			// Restored past the bounds if they were lowered: what was answered stays.
			if re = cg.regexes[m.regex]; re == nil {
				var rx *regexp.Regexp
				if rx, err = regexp.Compile("^(?:" + m.regex + ")$"); err == nil {
					re = &regexEntry{re: rx}
				}
			}
		}
		if err != nil {
			g.c.log.Error("groups: consumer group member record does not decode", "group", g.name, "member", mr.ID, "err", err)
			continue
		}
		for _, a := range []assign.Partitions{m.assigned, m.revoking} {
			for t, ps := range a {
				for _, p := range ps {
					cg.owners[tp{t, p}] = m.id
				}
			}
		}
		cg.members[m.id] = m
		if re != nil {
			g.keepRegex(m.regex, re)
			m.re = re.re
		}
		g.c.countMember(m.principal)
		if m.instanceID != nil {
			cg.static[*m.instanceID] = m.id
		}
		if m.state == memberUnrevoked {
			g.armRevocation(m)
		}
		g.startConsumerSession(m)
	}
	if len(cg.members) > 0 {
		g.state = Stable
	}
	if rec.PerMember {
		// What was restored is what the records hold; an earlier release's record is
		// rewritten whole by the next write.
		st := &cg.stored
		st.written, st.topics = true, cg.topics
		st.group = consumerLevel{epoch: cg.epoch, assignEpoch: cg.assignEpoch, assignor: cg.assignorName}
		if len(cg.members) == 0 {
			st.group.stateMs = sg.Record.StateMs
		}
		st.members = make(map[string]*storedMember, len(cg.members))
		for id, m := range cg.members {
			st.members[id] = snapshotMember(m, cg.target[id])
		}
	}
}
