// Package groups is Inlet's group coordinator for Kafka's classic group protocol: JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, committed offsets, and the admin views of groups.
//
// It follows Kafka's kafka.coordinator.group.GroupCoordinator and GroupMetadata (2.8-3.x): a
// group moves through the states
//
//	Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...
//	any   -> Dead (deleted)
//
// PreparingRebalance collects JoinGroups until every known member has rejoined or the largest
// rebalance timeout of the members passes; members that did not rejoin are removed (static
// members stay). Then the generation advances, one protocol is chosen by vote, every waiting
// JoinGroup is answered (the leader gets the members and their metadata), and the group waits
// in CompletingRebalance for the leader's SyncGroup with the assignment. Requests carrying a
// stale generation get ILLEGAL_GENERATION, unknown members UNKNOWN_MEMBER_ID, a static member
// replaced by a newer instance FENCED_INSTANCE_ID; v4+ JoinGroups without a member id get
// MEMBER_ID_REQUIRED and an id to rejoin with (KIP-394).
//
// The protocol type is opaque: "consumer", Kafka Connect's "connect", or anything else.
//
// Concurrency: Coordinator.mu guards the map of groups; each group has its own mutex, held
// while its state changes and while its offsets are written (one synced Pebble batch), so
// commits of one group are ordered. JoinGroup and SyncGroup block the connection's worker on
// a per-member channel, as Kafka parks the request in a delayed operation. Timers (session
// expiry, rebalance and sync deadlines) take the group's lock and check that they are still
// current. Lock order: Coordinator.mu is never held while taking a group.mu (a group.mu holder
// may take it, to remove the group); neither is held while a request waits.
package groups

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/groups/validate"
	"inlet/meta"
	"inlet/wire"
)

// State is a group's state (GroupMetadata's GroupState).
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	}
	return "Dead"
}

// Config holds the coordinator's settings (Kafka's broker configs of the same names).
type Config struct {
	MinSessionTimeout time.Duration // group.min.session.timeout.ms, default 6s
	MaxSessionTimeout time.Duration // group.max.session.timeout.ms, default 30 min
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long a new group waits
	// for more members before its first rebalance. The server passes Kafka's default, 3 s,
	// unless configured (tests use 0); the zero value here means no delay.
	InitialRebalanceDelay time.Duration
	MaxMetadataBytes      int // offset.metadata.max.bytes, default 4096
	// PartitionExists tells whether a topic partition exists, for OffsetCommit's
	// UNKNOWN_TOPIC_OR_PARTITION.
	PartitionExists func(topic string, partition int32) bool
	Logger          *slog.Logger

	// OffsetsRetention is offsets.retention.minutes (default 7 days, KIP-211; negative:
	// never): the offsets of an Empty group expire this long after the later of the group
	// becoming Empty and their commit; a group without a protocol type (only simple commits)
	// counts from each commit, a Stable consumer group's offsets of topics it no longer
	// subscribes to likewise. An Empty group left without offsets is removed (expiry.go).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms (default 10 min):
	// how often expiry runs, from Start on; negative: never (tests call ExpireOffsets).
	OffsetsRetentionCheckInterval time.Duration
	// PendingTxnOffset reports whether an open transaction holds an offset of the group for
	// the partition (txn.Coordinator.PendingOffset): such an offset does not expire, and a
	// group with one is not removed. Nil: none.
	PendingTxnOffset func(group, topic string, partition int32) bool
	PendingTxnGroup  func(group string) bool
	// Consumer is the KIP-848 consumer groups' settings (consumer_group.go).
	Consumer ConsumerConfig
	// Now is the clock of commit times, state times and expiry (time.Now when nil).
	Now func() time.Time
	// MaxGroups bounds the groups the node holds (0: no bound): a request that would create
	// one more is refused POLICY_VIOLATION (Kafka has no such bound, nor Redpanda; its
	// group.max.size bounds a group's members). Groups loaded at start-up are all kept.
	MaxGroups int
}

// Kafka's defaults of offsets.retention.minutes and offsets.retention.check.interval.ms.
const (
	DefaultOffsetsRetention              = 7 * 24 * time.Hour
	DefaultOffsetsRetentionCheckInterval = 10 * time.Minute
)

// Store keeps offsets and group records durable (meta.Store implements it).
type Store interface {
	CommitOffsets(group string, offsets map[meta.OffsetKey]meta.CommittedOffset) error
	DeleteOffsets(group string, keys []meta.OffsetKey) error
	DeleteGroup(group string) error
	SaveGroup(group string, rec meta.GroupRecord) error
	SaveConsumerGroup(group string, w meta.ConsumerGroupWrite) error
	LoadGroups() (map[string]*meta.StoredGroup, error)
}

// Coordinator coordinates every group of the node.
type Coordinator struct {
	cfg   Config
	store Store
	log   *slog.Logger

	mu      sync.Mutex
	groups  map[string]*group
	closed  bool
	refused atomic.Uint64 // creations refused by MaxGroups (Refused)

	stop chan struct{} // closed by Close: ends the expiry loop
	done sync.WaitGroup

	// topicsGen counts topic changes (TopicsChanged): consumer groups match their regular
	// expressions again when it moves.
	topicsGen topicsCounter
	// consumerMembers counts KIP-848 members per principal (consumer_bounds.go).
	consumerMembers principalMembers
}

type protocol struct {
	name     string
	metadata []byte
}

type member struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string
	protoType  string
	protocols  []protocol
	session    time.Duration
	rebalance  time.Duration
	assignment []byte

	joinCh   chan *kmsg.JoinGroupResponse // set while a JoinGroup waits
	joinVer  int16
	syncCh   chan *kmsg.SyncGroupResponse // set while a SyncGroup waits
	synced   bool                         // sent SyncGroup in this generation
	isNew    bool                         // joined in the current rebalance, not yet answered
	deadline time.Time                    // session expiry, pushed by heartbeats
	timer    *time.Timer
}

type group struct {
	c    *Coordinator
	name string

	mu           sync.Mutex
	state        State
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string // group.instance.id -> member id
	pending      map[string]bool   // member ids handed out with MEMBER_ID_REQUIRED
	timerSeq     uint64            // invalidates stale rebalance/sync timers
	offsets      map[meta.OffsetKey]meta.CommittedOffset
	// stateMs is when the group last became Empty (unix ms), stored in its record while it is
	// Empty: its offsets expire from it (GroupMetadata.currentStateTimestamp).
	stateMs int64
	// committedAt orders the commits of each offset (unix ns) for those of transactions,
	// applied when they commit: a later plain commit wins over them. Offsets loaded at
	// start-up count from their commit time.
	committedAt map[meta.OffsetKey]int64
	// cg is the state of a KIP-848 consumer group (consumer_group.go); nil for a classic one.
	cg *consumerGroup
	// consumerKeys says the group may still have a consumer group's topics record (it was one
	// until it emptied and a classic member joined): its next classic write removes them.
	consumerKeys bool
}

// New loads the stored groups and offsets.
func New(store Store, cfg Config) (*Coordinator, error) {
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = 6 * time.Second
	}
	if cfg.MaxSessionTimeout == 0 {
		cfg.MaxSessionTimeout = 30 * time.Minute
	}
	if cfg.MaxMetadataBytes == 0 {
		cfg.MaxMetadataBytes = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PartitionExists == nil {
		cfg.PartitionExists = func(string, int32) bool { return true }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OffsetsRetention == 0 {
		cfg.OffsetsRetention = DefaultOffsetsRetention
	}
	cfg.Consumer.setDefaults()
	if cfg.OffsetsRetentionCheckInterval == 0 {
		cfg.OffsetsRetentionCheckInterval = DefaultOffsetsRetentionCheckInterval
	}
	c := &Coordinator{cfg: cfg, store: store, log: cfg.Logger, groups: map[string]*group{}, stop: make(chan struct{})}
	stored, err := store.LoadGroups()
	if err != nil {
		return nil, err
	}
	for name, sg := range stored {
		g := c.newGroup(name)
		g.protocolType = sg.Record.ProtocolType
		g.generation = sg.Record.Generation
		g.stateMs = sg.Record.StateMs
		if g.stateMs == 0 {
			// Saved while it had members (whom only a Stable record brings back), or before
			// state times were kept: it is Empty from this start on.
			g.stateMs = cfg.Now().UnixMilli()
		}
		g.offsets = sg.Offsets
		if sg.Record.Consumer != nil {
			g.restoreConsumer(sg)
		} else {
			g.restoreMembers(sg.Record)
			g.consumerKeys = sg.ConsumerTopics != nil || len(sg.ConsumerMembers) > 0
		}
		c.groups[name] = g
	}
	return c, nil
}

// Start runs offset expiry every OffsetsRetentionCheckInterval, the first time one interval
// from now (expireLoop says why), until Close.
func (c *Coordinator) Start() {
	if every := c.cfg.OffsetsRetentionCheckInterval; every > 0 {
		c.done.Add(1)
		go c.expireLoop(every)
	}
}

// Close stops every timer's effect and the expiry loop; waiting requests are released by
// their callers.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if !c.closed {
		close(c.stop)
	}
	c.closed = true
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		for _, m := range g.members {
			if m.timer != nil {
				m.timer.Stop()
			}
		}
		g.timerSeq++
		g.mu.Unlock()
	}
	c.done.Wait()
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Coordinator) newGroup(name string) *group {
	return &group{c: c, name: name, members: map[string]*member{}, static: map[string]string{},
		pending: map[string]bool{}, offsets: map[meta.OffsetKey]meta.CommittedOffset{}}
}

// DefaultMaxGroups is the default of the server's MaxGroups (max.groups): a group with one
// committed offset holds about 2 KiB, so 20,000 groups hold about 40 MiB.
const DefaultMaxGroups = 20000

// ErrGroupBound is the code of a request refused because the node holds MaxGroups groups:
// POLICY_VIOLATION, which Kafka's clients treat as fatal for the request, not to be retried.
const ErrGroupBound = wire.ErrPolicyViolation

// Full reports whether the node holds MaxGroups groups, so that no group can be created.
func (c *Coordinator) Full() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.MaxGroups > 0 && len(c.groups) >= c.cfg.MaxGroups
}

// Exists reports whether the node holds the group (package server's bound per principal).
func (c *Coordinator) Exists(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[name] != nil
}

// GroupCount is the number of groups the node holds (metrics).
func (c *Coordinator) GroupCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.groups)
}

// Refused is the number of group creations MaxGroups refused since start (metrics).
func (c *Coordinator) Refused() uint64 { return c.refused.Load() }

// get returns the named group, creating it (Empty) when create is set and MaxGroups allows
// (nil otherwise: the caller tells a closed coordinator from a full one by Full).
func (c *Coordinator) get(name string, create bool) *group { return c.lookup(name, create, true) }

// lookup is get; bounded false creates past MaxGroups (a committed transaction's offsets,
// whose group was there when the transaction added them).
func (c *Coordinator) lookup(name string, create, bounded bool) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil && create && bounded && !c.closed && c.cfg.MaxGroups > 0 && len(c.groups) >= c.cfg.MaxGroups {
		c.refused.Add(1)
		return nil
	}
	if g == nil && create && !c.closed {
		g = c.newGroup(name)
		c.groups[name] = g
	}
	return g
}

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	u := hex.EncodeToString(b[:])
	// Kafka's member ids are clientId + "-" + a random UUID. The client id is cut so that the
	// member id is a string the protocol carries (37 bytes of dash and UUID).
	clientID = wire.CleanString(clientID, wire.MaxStringLength-37)
	return clientID + "-" + u[0:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:]
}

// ---- JoinGroup ----

// Join handles a JoinGroup (GroupCoordinator.handleJoinGroup). It blocks until the rebalance
// completes, or until done is closed (the node is shutting down: NOT_COORDINATOR sends the
// client to find the coordinator again) or gone is (the client's connection closed: the
// answer would go nowhere; the member stays in the rebalance as Kafka keeps it, until its
// session expires).
func (c *Coordinator) Join(req *kmsg.JoinGroupRequest, clientID, clientHost string, done, gone <-chan struct{}) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	resp.MemberID = req.MemberID
	fail := func(code int16) *kmsg.JoinGroupResponse { resp.ErrorCode = code; return resp }
	if req.Group == "" || !wire.ValidName(req.Group) {
		return fail(wire.ErrInvalidGroupID)
	}
	if !validate.JoinNames(req) {
		return fail(wire.ErrInvalidRequest)
	}
	// The client id comes from the request header (at most MaxStringLength bytes, any bytes):
	// kept only to be shown, it is made valid UTF-8 for the group's record.
	clientID = wire.CleanString(clientID, wire.MaxStringLength)
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return fail(wire.ErrInvalidSessionTimeout)
	}
	rebalance := session // v0 has no rebalance timeout: the session timeout serves
	if req.Version >= 1 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	unknown := req.MemberID == ""
	g := c.get(req.Group, unknown)
	if g == nil {
		if c.isClosed() {
			return fail(wire.ErrNotCoordinator)
		}
		if unknown && c.Full() {
			return fail(ErrGroupBound)
		}
		return fail(wire.ErrUnknownMemberID)
	}
	protos := make([]protocol, 0, len(req.Protocols))
	for _, p := range req.Protocols {
		// Request byte slices alias the pooled frame buffer, which is reused once the
		// request is answered: anything the group keeps is copied.
		protos = append(protos, protocol{p.Name, append([]byte{}, p.Metadata...)})
	}

	g.mu.Lock()
	ch, early := g.join(req, clientID, clientHost, session, rebalance, protos, unknown)
	g.mu.Unlock()
	if early != nil {
		return early
	}
	select {
	case r := <-ch:
		return r
	case <-done:
		return fail(wire.ErrNotCoordinator)
	case <-gone:
		return fail(wire.ErrNotCoordinator)
	}
}

// join runs under g.mu. It returns either an immediate response or the channel the answer
// will arrive on.
func (g *group) join(req *kmsg.JoinGroupRequest, clientID, clientHost string, session, rebalance time.Duration, protos []protocol, unknown bool) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	resp.MemberID = req.MemberID
	fail := func(code int16) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
		resp.ErrorCode = code
		return nil, resp
	}
	if g.state == Dead {
		// Deleted while this request was on its way; the client looks the coordinator up
		// again and retries.
		return fail(wire.ErrCoordinatorNotAvailable)
	}
	if g.cg != nil {
		// A consumer group (KIP-848) takes no classic member while it has members; an empty
		// one becomes a classic group (Kafka converts it; its offsets stay).
		if len(g.cg.members) > 0 {
			return fail(wire.ErrInconsistentGroupProtocol)
		}
		g.cg, g.consumerKeys = nil, true
	}
	if !g.supports(req.ProtocolType, protos) {
		return fail(wire.ErrInconsistentGroupProtocol)
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	if unknown {
		id := newMemberID(clientID)
		if req.InstanceID != nil {
			return g.staticJoin(req, id, clientID, clientHost, session, rebalance, protos, ch)
		}
		if req.Version >= 4 {
			// KIP-394: hand out the id and have the client rejoin with it, so a client that
			// times out and retries does not leave a ghost member behind.
			g.pending[id] = true
			g.expirePendingAfter(id, session)
			resp.MemberID = id
			return fail(wire.ErrMemberIDRequired)
		}
		g.addMember(id, req, clientID, clientHost, session, rebalance, protos, ch)
		return ch, nil
	}

	// A known (or pending) member rejoins (doCurrentMemberJoin).
	if g.pending[req.MemberID] {
		delete(g.pending, req.MemberID)
		g.addMember(req.MemberID, req, clientID, clientHost, session, rebalance, protos, ch)
		return ch, nil
	}
	m := g.members[req.MemberID]
	if req.InstanceID != nil {
		if owner, ok := g.static[*req.InstanceID]; ok && owner != req.MemberID {
			return fail(wire.ErrFencedInstanceID)
		}
	}
	if m == nil {
		return fail(wire.ErrUnknownMemberID)
	}
	switch g.state {
	case PreparingRebalance:
		g.updateMember(m, req, session, rebalance, protos, ch)
		g.maybeCompleteJoin()
		return ch, nil
	case CompletingRebalance:
		if sameProtocols(m.protocols, protos) {
			// A retried JoinGroup whose answer was lost: answer it again.
			return nil, g.joinResponse(req.Version, m)
		}
		g.updateMember(m, req, session, rebalance, protos, ch)
		g.prepareRebalance()
		return ch, nil
	case Stable:
		if m.id == g.leader || !sameProtocols(m.protocols, protos) {
			// The leader rejoining (say, because its subscription changed) or changed
			// metadata forces a rebalance.
			g.updateMember(m, req, session, rebalance, protos, ch)
			g.prepareRebalance()
			return ch, nil
		}
		return nil, g.joinResponse(req.Version, m)
	}
	// Empty: a member id that is not in the group.
	return fail(wire.ErrUnknownMemberID)
}

// staticJoin handles a JoinGroup with a group.instance.id and no member id (KIP-345).
func (g *group) staticJoin(req *kmsg.JoinGroupRequest, id, clientID, clientHost string, session, rebalance time.Duration, protos []protocol, ch chan *kmsg.JoinGroupResponse) (chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	instance := *req.InstanceID
	oldID, known := g.static[instance]
	if !known {
		g.addMember(id, req, clientID, clientHost, session, rebalance, protos, ch)
		return ch, nil
	}
	// A new instance of a known static member takes over its member (and assignment); the
	// old instance is fenced (GroupMetadata.replaceStaticMember).
	old := g.members[oldID]
	if old == nil {
		panic("BUG: groups: static member map names a missing member")
	}
	if old.joinCh != nil {
		r := g.errorJoin(old.joinVer, old.id, wire.ErrFencedInstanceID)
		old.joinCh <- r
		old.joinCh = nil
	}
	if old.syncCh != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = wire.ErrFencedInstanceID
		old.syncCh <- r
		old.syncCh = nil
	}
	delete(g.members, oldID)
	old.id = id
	old.clientID, old.clientHost = clientID, clientHost
	g.members[id] = old
	g.static[instance] = id
	if g.leader == oldID {
		g.leader = id
	}
	old.deadline = time.Now().Add(session)
	oldProtos := old.protocols
	old.protocols, old.protoType, old.session, old.rebalance = protos, req.ProtocolType, session, rebalance
	gen := g.generation
	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol && sameProtocols(oldProtos, protos) {
			// Nothing the assignment depends on changed: no rebalance (the point of static
			// membership). The member syncs to get its assignment back. Its new member id is
			// saved, as Kafka stores the group here: after a restart the instance id must
			// name the member now using it.
			g.persist()
			return nil, g.joinResponse(req.Version, old)
		}
		old.joinCh, old.joinVer = ch, req.Version
		g.prepareRebalance()
	case CompletingRebalance:
		old.joinCh, old.joinVer = ch, req.Version
		g.prepareRebalance()
	default: // PreparingRebalance (or Empty, with a static member that has not left)
		old.joinCh, old.joinVer = ch, req.Version
		if g.state == Empty {
			g.prepareRebalance()
		}
		g.maybeCompleteJoin()
	}
	// The instance id names its new member id from now on, also after a restart mid-rebalance
	// (a join this completed has saved it: completeJoin).
	if g.generation == gen {
		g.persist()
	}
	return ch, nil
}

func (g *group) supports(protoType string, protos []protocol) bool {
	if protoType == "" || len(protos) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protoType != g.protocolType {
		return false
	}
	for _, p := range protos {
		all := true
		for _, m := range g.members {
			if !m.supports(p.name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (m *member) supports(name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func sameProtocols(a, b []protocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || string(a[i].metadata) != string(b[i].metadata) {
			return false
		}
	}
	return true
}

func (g *group) addMember(id string, req *kmsg.JoinGroupRequest, clientID, clientHost string, session, rebalance time.Duration, protos []protocol, ch chan *kmsg.JoinGroupResponse) {
	m := &member{id: id, clientID: clientID, clientHost: clientHost, isNew: true}
	if req.InstanceID != nil {
		inst := *req.InstanceID
		m.instanceID = &inst
		g.static[inst] = id
	}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	if g.leader == "" {
		g.leader = id
	}
	g.updateMember(m, req, session, rebalance, protos, ch)
	g.startSessionTimer(m)
	switch g.state {
	case PreparingRebalance:
		g.maybeCompleteJoin()
	default:
		g.prepareRebalance()
	}
}

func (g *group) updateMember(m *member, req *kmsg.JoinGroupRequest, session, rebalance time.Duration, protos []protocol, ch chan *kmsg.JoinGroupResponse) {
	m.protoType, m.protocols, m.session, m.rebalance = req.ProtocolType, protos, session, rebalance
	if m.joinCh != nil && m.joinCh != ch {
		// A second JoinGroup replaces a waiting one (its client gave up on it).
		m.joinCh <- g.errorJoin(m.joinVer, m.id, wire.ErrUnknownMemberID)
	}
	m.joinCh, m.joinVer = ch, req.Version
	m.deadline = time.Now().Add(session)
}

func (g *group) errorJoin(version int16, memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = -1
	r.MemberID = memberID
	r.ErrorCode = code
	return r
}

// joinResponse is the answer to a member of the current generation.
func (g *group) joinResponse(version int16, m *member) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.LeaderID = g.leader
	r.MemberID = m.id
	if m.id == g.leader {
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			o := g.members[id]
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = o.id
			jm.InstanceID = o.instanceID
			jm.ProtocolMetadata = o.metadata(g.protocol)
			r.Members = append(r.Members, jm)
		}
	}
	return r
}

// prepareRebalance moves the group to PreparingRebalance (GroupCoordinator.prepareRebalance).
func (g *group) prepareRebalance() {
	if g.state == CompletingRebalance {
		// Members waiting for their assignment learn that it will not come.
		for _, m := range g.members {
			if m.syncCh != nil {
				r := kmsg.NewPtrSyncGroupResponse()
				r.ErrorCode = wire.ErrRebalanceInProgress
				m.syncCh <- r
				m.syncCh = nil
			}
		}
	}
	for _, m := range g.members {
		m.assignment = nil
	}
	wait := time.Duration(0)
	wasEmpty := g.state == Empty
	if wasEmpty {
		wait = g.c.cfg.InitialRebalanceDelay
	} else {
		for _, m := range g.members {
			wait = max(wait, m.rebalance)
		}
	}
	g.state = PreparingRebalance
	g.timerSeq++
	seq := g.timerSeq
	time.AfterFunc(wait, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.timerSeq == seq && g.state == PreparingRebalance && !g.c.isClosed() {
			g.completeJoin()
		}
	})
	if !wasEmpty || g.c.cfg.InitialRebalanceDelay == 0 {
		g.maybeCompleteJoin()
	}
}

// maybeCompleteJoin completes the join phase once every member has rejoined and no
// MEMBER_ID_REQUIRED member is outstanding (GroupMetadata.hasAllMembersJoined).
func (g *group) maybeCompleteJoin() {
	if g.state != PreparingRebalance || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.joinCh == nil {
			return
		}
	}
	g.completeJoin()
}

// completeJoin ends the join phase (GroupCoordinator.onCompleteJoin).
func (g *group) completeJoin() {
	for id, m := range g.members {
		if m.joinCh == nil && m.instanceID == nil {
			g.removeMember(id)
		}
	}
	// A leader that did not rejoin (a static member) hands over to one that did.
	if l := g.members[g.leader]; l == nil || l.joinCh == nil {
		g.leader = ""
		ids := make([]string, 0, len(g.members))
		for id, m := range g.members {
			if m.joinCh != nil {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		if len(ids) > 0 {
			g.leader = ids[0]
		}
	}
	g.generation++
	g.timerSeq++
	if len(g.members) == 0 || g.leader == "" {
		g.state = Empty
		g.stateMs = g.c.cfg.Now().UnixMilli()
		g.protocol = ""
		g.leader = ""
		g.persist()
		return
	}
	g.protocol = g.selectProtocol()
	g.state = CompletingRebalance
	g.persist()
	var rebalance time.Duration
	for _, m := range g.members {
		m.synced = false
		m.deadline = time.Now().Add(m.session)
		rebalance = max(rebalance, m.rebalance)
		if m.joinCh != nil {
			m.joinCh <- g.joinResponse(m.joinVer, m)
			m.joinCh = nil
			m.isNew = false
		}
	}
	// Members that do not sync within the rebalance timeout are removed and the group
	// rebalances without them (KAFKA-9752's pending-sync timeout), so a leader that died
	// after joining cannot hold the group in CompletingRebalance forever.
	seq, gen := g.timerSeq, g.generation
	time.AfterFunc(rebalance, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.timerSeq != seq || g.generation != gen || g.state != CompletingRebalance || g.c.isClosed() {
			return
		}
		for id, m := range g.members {
			if !m.synced {
				g.removeMember(id)
			}
		}
		g.afterRemoval()
	})
}

// selectProtocol picks the protocol every member supports with the most first-choice votes
// (GroupMetadata.selectProtocol).
func (g *group) selectProtocol() string {
	var candidates []string
	for _, m := range g.members {
		for _, p := range m.protocols {
			ok := true
			for _, o := range g.members {
				if !o.supports(p.name) {
					ok = false
					break
				}
			}
			if ok && !contains(candidates, p.name) {
				candidates = append(candidates, p.name)
			}
		}
		break // every candidate is one of any member's protocols
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if contains(candidates, p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// persist saves the group's record; a consumer group's, its changed records
// (persistConsumer). A Stable classic group's record holds its members and their
// assignments (GroupCoordinator stores the group when the leader's SyncGroup completes); a
// rebalancing group's holds its members without assignments and says it was rebalancing, so a
// restart brings the members back to rejoin (instead of answering their JoinGroup with
// UNKNOWN_MEMBER_ID) and never to sync to an assignment they were not given.
func (g *group) persist() {
	if g.c.isClosed() {
		return
	}
	if g.cg != nil {
		g.persistConsumer()
		return
	}
	rec := meta.GroupRecord{ProtocolType: g.protocolType, Generation: g.generation}
	if g.state == Empty {
		rec.StateMs = g.stateMs // when it emptied; otherwise a restart empties it (New)
	} else {
		// A rebalancing group keeps the protocol its members' last JoinGroup answer named,
		// which their SyncGroup repeats (Kafka changes it only when the join completes).
		rec.Protocol, rec.Leader = g.protocol, g.leader
		rec.Rebalancing = g.state != Stable
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			m := g.members[id]
			mr := meta.GroupMemberRecord{ID: id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
				SessionMs: m.session.Milliseconds(), RebalanceMs: m.rebalance.Milliseconds()}
			if g.state == Stable {
				mr.Assignment = m.assignment
			}
			for _, p := range m.protocols {
				mr.Protocols = append(mr.Protocols, meta.GroupProtocolRecord{Name: p.name, Metadata: p.metadata})
			}
			rec.Members = append(rec.Members, mr)
		}
	}
	var err error
	if g.consumerKeys {
		if err = g.c.store.SaveConsumerGroup(g.name, meta.ConsumerGroupWrite{Record: &rec, Clear: true}); err == nil {
			g.consumerKeys = false
		}
	} else {
		err = g.c.store.SaveGroup(g.name, rec)
	}
	if err != nil {
		g.c.log.Error("groups: save group", "group", g.name, "err", err)
	}
}

// restoreMembers brings back a group's members as persist saved them (at start-up, before any
// request), each member's session starting now, as GroupMetadataManager does when it loads a
// group. A Stable group is Stable again; a group saved mid-rebalance starts a new rebalance
// (PreparingRebalance), so its members rejoin under the ids they hold.
func (g *group) restoreMembers(rec meta.GroupRecord) {
	if len(rec.Members) == 0 {
		return
	}
	g.state, g.protocol, g.leader = Stable, rec.Protocol, rec.Leader
	for _, mr := range rec.Members {
		m := &member{id: mr.ID, instanceID: mr.InstanceID, clientID: mr.ClientID, clientHost: mr.ClientHost,
			protoType: rec.ProtocolType, session: time.Duration(mr.SessionMs) * time.Millisecond,
			rebalance: time.Duration(mr.RebalanceMs) * time.Millisecond, assignment: mr.Assignment, synced: true}
		for _, p := range mr.Protocols {
			m.protocols = append(m.protocols, protocol{name: p.Name, metadata: p.Metadata})
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
		g.startSessionTimer(m)
	}
	if rec.Rebalancing {
		g.prepareRebalance()
	}
}

// removeMember drops a member, answering anything it waits for with UNKNOWN_MEMBER_ID.
func (g *group) removeMember(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	if m.joinCh != nil {
		m.joinCh <- g.errorJoin(m.joinVer, id, wire.ErrUnknownMemberID)
		m.joinCh = nil
	}
	if m.syncCh != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = wire.ErrUnknownMemberID
		m.syncCh <- r
		m.syncCh = nil
	}
	if g.leader == id {
		g.leader = ""
		ids := slices.Sorted(maps.Keys(g.members))
		if len(ids) > 0 {
			g.leader = ids[0]
		}
	}
}

// afterRemoval moves the group on after members left (removeMemberAndUpdateGroup).
func (g *group) afterRemoval() {
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance()
	case PreparingRebalance:
		g.maybeCompleteJoin()
	}
}

// startSessionTimer arms the member's session expiry. Heartbeats only push m.deadline; the
// timer re-arms itself until the deadline has really passed, so no heartbeat races a timer
// reset.
func (g *group) startSessionTimer(m *member) {
	m.deadline = time.Now().Add(m.session)
	m.timer = time.AfterFunc(m.session, func() { g.checkSession(m) })
}

func (g *group) checkSession(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.members[m.id] != m || g.c.isClosed() {
		return
	}
	// Kafka keeps members waiting in a JoinGroup or SyncGroup alive
	// (MemberMetadata.shouldKeepAlive); the rebalance and sync timeouts bound those waits.
	if m.joinCh != nil || m.syncCh != nil {
		m.timer.Reset(m.session)
		return
	}
	if left := time.Until(m.deadline); left > 0 {
		m.timer.Reset(left)
		return
	}
	g.c.log.Info("groups: member session expired", "group", g.name, "member", m.id)
	g.removeMember(m.id)
	g.afterRemoval()
}

func (g *group) expirePendingAfter(id string, session time.Duration) {
	time.AfterFunc(session, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.pending[id] {
			delete(g.pending, id)
			g.maybeCompleteJoin()
		}
	})
}

// ---- SyncGroup ----

// Sync handles a SyncGroup (GroupCoordinator.handleSyncGroup). Followers wait for the
// leader's assignment, or until done or gone is closed (as for Join).
func (c *Coordinator) Sync(req *kmsg.SyncGroupRequest, done, gone <-chan struct{}) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(code int16) *kmsg.SyncGroupResponse { resp.ErrorCode = code; return resp }
	g := c.get(req.Group, false)
	if g == nil {
		return fail(wire.ErrUnknownMemberID)
	}
	g.mu.Lock()
	ch, code := g.sync(req)
	g.mu.Unlock()
	if ch == nil {
		if code != wire.ErrNone {
			return fail(code)
		}
		panic("BUG: groups: sync returned neither a channel nor an error")
	}
	select {
	case r := <-ch:
		r.Version = req.Version
		if req.Version >= 5 && r.ErrorCode == wire.ErrNone {
			r.ProtocolType, r.Protocol = req.ProtocolType, req.Protocol
		}
		return r
	case <-done:
		return fail(wire.ErrNotCoordinator)
	case <-gone:
		return fail(wire.ErrNotCoordinator)
	}
}

// currentMember is the member a SyncGroup, Heartbeat or OffsetCommit names, checked in Kafka's
// order (GroupCoordinator.validateCurrentMember, then each handler's generation check): a static
// instance id owned by another member is fenced, then an unknown member id is unknown, then a
// stale generation is illegal. It
// returns nil and the error code when a check fails.
func (g *group) currentMember(memberID string, instanceID *string, generation int32) (*member, int16) {
	if instanceID != nil {
		if owner, ok := g.static[*instanceID]; ok && owner != memberID {
			return nil, wire.ErrFencedInstanceID
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, wire.ErrUnknownMemberID
	}
	if generation != g.generation {
		return nil, wire.ErrIllegalGeneration
	}
	return m, wire.ErrNone
}

func (g *group) sync(req *kmsg.SyncGroupRequest) (chan *kmsg.SyncGroupResponse, int16) {
	if g.state == Dead {
		return nil, wire.ErrCoordinatorNotAvailable
	}
	m, code := g.currentMember(req.MemberID, req.InstanceID, req.Generation)
	if m == nil {
		return nil, code
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		return nil, wire.ErrInconsistentGroupProtocol
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	switch g.state {
	case Empty:
		return nil, wire.ErrUnknownMemberID
	case PreparingRebalance:
		return nil, wire.ErrRebalanceInProgress
	case CompletingRebalance:
		m.synced = true
		m.deadline = time.Now().Add(m.session)
		if m.syncCh != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.ErrorCode = wire.ErrRebalanceInProgress
			m.syncCh <- r
		}
		m.syncCh = ch
		if m.id == g.leader {
			assigned := map[string][]byte{}
			for _, a := range req.GroupAssignment {
				assigned[a.MemberID] = append([]byte{}, a.MemberAssignment...) // see Join: aliases the frame
			}
			for id, o := range g.members {
				o.assignment = assigned[id] // members the leader left out get an empty one
			}
			g.state = Stable
			g.timerSeq++ // cancels the pending-sync timeout
			g.persist()
			for _, o := range g.members {
				if o.syncCh != nil {
					r := kmsg.NewPtrSyncGroupResponse()
					r.MemberAssignment = o.assignment
					o.syncCh <- r
					o.syncCh = nil
				}
			}
		}
		return ch, wire.ErrNone
	case Stable:
		m.deadline = time.Now().Add(m.session)
		r := kmsg.NewPtrSyncGroupResponse()
		r.MemberAssignment = m.assignment
		ch <- r
		return ch, wire.ErrNone
	}
	return nil, wire.ErrCoordinatorNotAvailable
}

// ---- Heartbeat ----

// Heartbeat handles a Heartbeat (GroupCoordinator.handleHeartbeat).
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) int16 {
	g := c.get(req.Group, false)
	if g == nil {
		return wire.ErrUnknownMemberID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Dead {
		return wire.ErrCoordinatorNotAvailable
	}
	m, code := g.currentMember(req.MemberID, req.InstanceID, req.Generation)
	if m == nil {
		return code
	}
	m.deadline = time.Now().Add(m.session)
	switch g.state {
	case PreparingRebalance:
		return wire.ErrRebalanceInProgress
	case Empty:
		return wire.ErrUnknownMemberID
	}
	return wire.ErrNone
}

// ---- LeaveGroup ----

// Leave handles a LeaveGroup: v0-v2 name one member, v3+ a batch with instance ids (KIP-345).
func (c *Coordinator) Leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	type leaving struct {
		id       string
		instance *string
	}
	var who []leaving
	if req.Version < 3 {
		who = append(who, leaving{id: req.MemberID})
	} else {
		for _, m := range req.Members {
			who = append(who, leaving{id: m.MemberID, instance: m.InstanceID})
		}
	}
	g := c.get(req.Group, false)
	if g == nil {
		if req.Version < 3 {
			resp.ErrorCode = wire.ErrUnknownMemberID
			return resp
		}
		for _, w := range who {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = w.id, w.instance, wire.ErrUnknownMemberID
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Dead {
		resp.ErrorCode = wire.ErrCoordinatorNotAvailable
		return resp
	}
	removed := false
	for _, w := range who {
		code := wire.ErrNone
		id := w.id
		if w.instance != nil {
			owner, ok := g.static[*w.instance]
			switch {
			case !ok:
				code = wire.ErrUnknownMemberID
			case id != "" && owner != id:
				code = wire.ErrFencedInstanceID
			default:
				id = owner
			}
		} else if g.members[id] == nil {
			code = wire.ErrUnknownMemberID
		}
		if code == wire.ErrNone {
			g.removeMember(id)
			removed = true
		}
		if req.Version < 3 {
			resp.ErrorCode = code
		} else {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = w.id, w.instance, code
			resp.Members = append(resp.Members, rm)
		}
	}
	if removed {
		g.afterRemoval()
	}
	return resp
}
