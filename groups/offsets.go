package groups

import (
	"errors"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/meta"
	"inlet/wire"
)

// ---- OffsetCommit ----

// Commit handles an OffsetCommit (GroupCoordinator.handleCommitOffsets). Offsets are written
// in one synced Pebble batch before the answer; a commit with generation -1 and no member is a
// "simple" commit (an admin tool, or a consumer that assigns partitions itself) and is
// accepted while the group has no members.
func (c *Coordinator) Commit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	all := func(code int16) *kmsg.OffsetCommitResponse {
		for _, rt := range req.Topics {
			ot := kmsg.NewOffsetCommitResponseTopic()
			ot.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				op := kmsg.NewOffsetCommitResponseTopicPartition()
				op.Partition, op.ErrorCode = rp.Partition, code
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	}
	if req.Group == "" || !wire.ValidName(req.Group) {
		return all(wire.ErrInvalidGroupID)
	}
	generation := req.Generation
	if req.Version == 0 {
		generation = -1
	}
	g := c.get(req.Group, generation < 0)
	if g == nil {
		if c.isClosed() {
			return all(wire.ErrNotCoordinator)
		}
		if generation < 0 && c.Full() {
			return all(ErrGroupBound)
		}
		return all(wire.ErrIllegalGeneration)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if code := g.commitAllowed(req, generation); code != wire.ErrNone {
		return all(code)
	}
	now := c.cfg.Now().UnixMilli()
	batch := map[meta.OffsetKey]meta.CommittedOffset{}
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetCommitResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			md := ""
			if rp.Metadata != nil {
				md = *rp.Metadata
			}
			switch {
			case !c.cfg.PartitionExists(rt.Topic, rp.Partition):
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
			case len(md) > c.cfg.MaxMetadataBytes:
				op.ErrorCode = wire.ErrOffsetMetadataTooLarge
			default:
				ts := now
				if req.Version == 1 && rp.Timestamp >= 0 {
					ts = rp.Timestamp
				}
				batch[meta.OffsetKey{Topic: rt.Topic, Partition: rp.Partition}] = meta.CommittedOffset{
					Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: md, CommitTime: ts,
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if err := c.store.CommitOffsets(g.name, batch); err != nil {
		c.log.Error("groups: commit offsets", "group", g.name, "err", err)
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				if resp.Topics[ti].Partitions[pi].ErrorCode == wire.ErrNone {
					resp.Topics[ti].Partitions[pi].ErrorCode = wire.ErrKafkaStorageError
				}
			}
		}
		return resp
	}
	at := time.Now().UnixNano()
	for k, v := range batch {
		g.offsets[k] = v
		g.setCommittedAt(k, at)
	}
	return resp
}

func (g *group) setCommittedAt(k meta.OffsetKey, at int64) {
	if g.committedAt == nil {
		g.committedAt = map[meta.OffsetKey]int64{}
	}
	g.committedAt[k] = at
}

// lastCommitAt is when the group's offset of k was last committed (unix ns; 0: never).
func (g *group) lastCommitAt(k meta.OffsetKey) int64 {
	if at, ok := g.committedAt[k]; ok {
		return at
	}
	if o, ok := g.offsets[k]; ok {
		return o.CommitTime * int64(time.Millisecond)
	}
	return 0
}

// commitAllowed is GroupCoordinator.doCommitOffsets's membership and generation check.
func (g *group) commitAllowed(req *kmsg.OffsetCommitRequest, generation int32) int16 {
	if g.state == Dead {
		return wire.ErrCoordinatorNotAvailable
	}
	if g.cg != nil {
		return g.consumerCommitAllowed(req.MemberID, generation, req.Version, false)
	}
	// As Kafka 4's ClassicGroup.validateOffsetCommit: a commit with a negative generation comes
	// from an admin client or a consumer that assigns its partitions itself (librdkafka's
	// assign-only consumers send their own member id), and is taken while the group is Empty,
	// whatever member id it names.
	if generation < 0 && g.state == Empty && len(g.members) == 0 {
		return wire.ErrNone
	}
	if generation < 0 && req.MemberID == "" && req.InstanceID == nil {
		// A group managed by the coordinator does not take commits from outside it.
		return wire.ErrUnknownMemberID
	}
	m, code := g.currentMember(req.MemberID, req.InstanceID, generation)
	if m == nil {
		return code
	}
	switch g.state {
	case CompletingRebalance:
		return wire.ErrRebalanceInProgress
	case Stable, PreparingRebalance:
		m.deadline = time.Now().Add(m.session) // a commit counts as a heartbeat
		return wire.ErrNone
	}
	return wire.ErrUnknownMemberID
}

// ---- OffsetFetch ----

// FetchOffsets answers one group of an OffsetFetch: topics nil means every committed offset.
// A partition without a committed offset answers -1 (no error), as Kafka does.
func (c *Coordinator) FetchOffsets(name string, topics map[string][]int32, all bool) []kmsg.OffsetFetchResponseTopic {
	g := c.get(name, false)
	var offsets map[meta.OffsetKey]meta.CommittedOffset
	if g != nil {
		g.mu.Lock()
		if g.state != Dead {
			offsets = make(map[meta.OffsetKey]meta.CommittedOffset, len(g.offsets))
			for k, v := range g.offsets {
				offsets[k] = v
			}
		}
		g.mu.Unlock()
	}
	var out []kmsg.OffsetFetchResponseTopic
	add := func(topic string, partition int32, o meta.CommittedOffset, ok bool) {
		if len(out) == 0 || out[len(out)-1].Topic != topic {
			ot := kmsg.NewOffsetFetchResponseTopic()
			ot.Topic = topic
			out = append(out, ot)
		}
		op := kmsg.NewOffsetFetchResponseTopicPartition()
		op.Partition = partition
		op.Offset, op.LeaderEpoch = -1, -1
		md := ""
		if ok {
			op.Offset, op.LeaderEpoch, md = o.Offset, o.LeaderEpoch, o.Metadata
		}
		op.Metadata = &md
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, op)
	}
	if all {
		keys := make([]meta.OffsetKey, 0, len(offsets))
		for k := range offsets {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].Topic != keys[j].Topic {
				return keys[i].Topic < keys[j].Topic
			}
			return keys[i].Partition < keys[j].Partition
		})
		for _, k := range keys {
			add(k.Topic, k.Partition, offsets[k], true)
		}
		return out
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		for _, p := range topics[t] {
			o, ok := offsets[meta.OffsetKey{Topic: t, Partition: p}]
			add(t, p, o, ok)
		}
	}
	return out
}

// ---- ListGroups, DescribeGroups, DeleteGroups, OffsetDelete ----

// GroupListing is one group as ListGroups reports it.
type GroupListing struct {
	Name, ProtocolType string
	State              State
	// Type is "classic" or "consumer" (KIP-848); StateName is the state ListGroups shows
	// (a consumer group's: Empty, Assigning, Reconciling, Stable).
	Type, StateName string
}

// List returns every live group, sorted by name.
func (c *Coordinator) List() []GroupListing {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	out := make([]GroupListing, 0, len(gs))
	for _, g := range gs {
		g.mu.Lock()
		if g.state != Dead {
			l := GroupListing{Name: g.name, ProtocolType: g.protocolType, State: g.state, Type: "classic", StateName: g.state.String()}
			if g.cg != nil {
				l.Type, l.StateName = "consumer", g.cg.stateName()
			}
			out = append(out, l)
		}
		g.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CommittedOffset is one group's committed offset for one partition (CommittedOffsets).
type CommittedOffset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}

// CommittedOffsets lists every live group's committed offsets (metrics read them at scrape
// time). Each group's offsets are copied under its lock, so a group's list is one moment of
// it; the caller holds no lock of the coordinator's while it uses them.
func (c *Coordinator) CommittedOffsets() []CommittedOffset {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	var out []CommittedOffset
	for _, g := range gs {
		g.mu.Lock()
		if g.state != Dead {
			for k, o := range g.offsets {
				out = append(out, CommittedOffset{g.name, k.Topic, k.Partition, o.Offset})
			}
		}
		g.mu.Unlock()
	}
	return out
}

// Describe fills one DescribeGroups entry (GroupMetadata.summary): member metadata and
// assignments only in Stable; an unknown group is reported Dead without an error.
func (c *Coordinator) Describe(name string) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = name
	dg.State = Dead.String()
	dg.AuthorizedOperations = -2147483648
	g := c.get(name, false)
	if g == nil {
		return dg
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg != nil {
		// As Kafka 4 (KIP-1043): DescribeGroups describes classic groups only.
		msg := "Group " + name + " is not a classic group."
		dg.ErrorCode, dg.ErrorMessage = wire.ErrGroupIDNotFound, &msg
		return dg
	}
	dg.State = g.state.String()
	dg.ProtocolType = g.protocolType
	if g.state == Stable {
		dg.Protocol = g.protocol
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		if g.state == Stable {
			dm.ProtocolMetadata = m.metadata(g.protocol)
			dm.MemberAssignment = m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// Delete removes a group with no members and its offsets (GroupCoordinator.handleDeleteGroups).
func (c *Coordinator) Delete(name string) int16 {
	g := c.get(name, false)
	if g == nil {
		return wire.ErrGroupIDNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == Dead:
		return wire.ErrGroupIDNotFound
	case g.state != Empty:
		return wire.ErrNonEmptyGroup
	}
	if err := c.store.DeleteGroup(name); err != nil {
		c.log.Error("groups: delete group", "group", name, "err", err)
		return wire.ErrUnknownServerError
	}
	g.state = Dead
	g.offsets = map[meta.OffsetKey]meta.CommittedOffset{}
	c.mu.Lock()
	if c.groups[name] == g {
		delete(c.groups, name)
	}
	c.mu.Unlock()
	return wire.ErrNone
}

// DeleteOffsets handles an OffsetDelete (GroupCoordinator.handleDeleteOffsets): a consumer
// group with members keeps the offsets of topics it subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC); any other group with members refuses (NON_EMPTY_GROUP).
func (c *Coordinator) DeleteOffsets(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g := c.get(req.Group, false)
	if g == nil {
		resp.ErrorCode = wire.ErrGroupIDNotFound
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == Dead {
		resp.ErrorCode = wire.ErrGroupIDNotFound
		return resp
	}
	subscribed := map[string]bool{}
	if g.state != Empty {
		if g.protocolType != "consumer" {
			resp.ErrorCode = wire.ErrNonEmptyGroup
			return resp
		}
		for _, m := range g.members {
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(m.metadata(g.protocol)); err == nil {
				for _, t := range meta.Topics {
					subscribed[t] = true
				}
			}
		}
	}
	if g.cg != nil {
		maps.Copy(subscribed, g.cg.subscribedTopics())
	}
	var del []meta.OffsetKey
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetDeleteResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetDeleteResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case subscribed[rt.Topic]:
				op.ErrorCode = wire.ErrGroupSubscribedToTopic
			case !c.cfg.PartitionExists(rt.Topic, rp.Partition):
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
			default:
				del = append(del, meta.OffsetKey{Topic: rt.Topic, Partition: rp.Partition})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if err := c.store.DeleteOffsets(g.name, del); err != nil {
		c.log.Error("groups: delete offsets", "group", g.name, "err", err)
		resp.ErrorCode = wire.ErrUnknownServerError
		return resp
	}
	for _, k := range del {
		delete(g.offsets, k)
	}
	return resp
}

// RemoveTopic drops every group's committed offsets for a deleted topic
// (GroupMetadataManager.cleanupGroupMetadata).
func (c *Coordinator) RemoveTopic(topic string) {
	c.TopicsChanged() // consumer groups subscribing to it look their topics up again
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		var del []meta.OffsetKey
		for k := range g.offsets {
			if k.Topic == topic {
				del = append(del, k)
			}
		}
		if len(del) > 0 {
			if err := c.store.DeleteOffsets(g.name, del); err != nil {
				c.log.Error("groups: delete offsets of deleted topic", "group", g.name, "topic", topic, "err", err)
			}
			for _, k := range del {
				delete(g.offsets, k)
			}
		}
		g.mu.Unlock()
	}
}

// ---- TxnOffsetCommit ----

// CheckTxnCommit is the group's check of a TxnOffsetCommit (GroupCoordinator.doTxnCommitOffsets):
// a member id, instance id and generation, when given, must be the group's current ones. The
// offsets themselves wait in the transaction until it commits (ApplyTxnOffsets).
func (c *Coordinator) CheckTxnCommit(name, memberID string, instanceID *string, generation int32) int16 {
	if name == "" || !wire.ValidName(name) {
		return wire.ErrInvalidGroupID
	}
	g := c.get(name, true)
	if g == nil {
		if !c.isClosed() && c.Full() {
			return ErrGroupBound
		}
		return wire.ErrNotCoordinator // closing
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == Dead:
		return wire.ErrCoordinatorNotAvailable
	case g.cg != nil:
		if memberID == "" && generation < 0 {
			return wire.ErrNone
		}
		return g.consumerCommitAllowed(memberID, generation, 0, true)
	case instanceID != nil && g.static[*instanceID] != "" && g.static[*instanceID] != memberID:
		return wire.ErrFencedInstanceID
	case memberID != "" && g.members[memberID] == nil:
		return wire.ErrUnknownMemberID
	case generation >= 0 && generation != g.generation:
		return wire.ErrIllegalGeneration
	}
	return wire.ErrNone
}

// ApplyTxnOffsets commits the offsets of a committed transaction to the group, durably (one
// synced Pebble batch, as OffsetCommit). at says when each was given (TxnOffsetCommit): an
// offset committed since then outside the transaction stays, as Kafka keeps the later record.
func (c *Coordinator) ApplyTxnOffsets(name string, offsets map[meta.OffsetKey]meta.CommittedOffset, at map[meta.OffsetKey]int64) error {
	g := c.lookup(name, true, false)
	if g == nil {
		return errors.New("groups: coordinator closed")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range offsets {
		if g.lastCommitAt(k) > at[k] {
			delete(offsets, k)
		}
	}
	if err := c.store.CommitOffsets(g.name, offsets); err != nil {
		return err
	}
	for k, v := range offsets {
		g.offsets[k] = v
		g.setCommittedAt(k, at[k])
	}
	return nil
}

// MaxMetadataBytes is offset.metadata.max.bytes: longer commit metadata is
// OFFSET_METADATA_TOO_LARGE.
func (c *Coordinator) MaxMetadataBytes() int { return c.cfg.MaxMetadataBytes }
