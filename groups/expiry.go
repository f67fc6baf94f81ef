package groups

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/meta"
)

// Offset expiry: Kafka's offsets.retention.minutes as KIP-211 defines it
// (GroupMetadata.removeExpiredOffsets, GroupMetadataManager.cleanupGroupMetadata), every
// offsets.retention.check.interval.ms:
//
//   - an Empty group with a protocol type: an offset expires once retention has passed since
//     the later of the group becoming Empty (its stored state time) and the offset's commit
//     (Kafka counts from the state time alone; the later of the two keeps an offset committed
//     to an Empty group, by an admin tool, for its whole retention);
//   - a group without a protocol type (only ever simple commits, generation -1): each offset
//     from its own commit;
//   - a Stable consumer group: the offsets of topics no member subscribes to, from their commit;
//   - any other group (rebalancing, or not a consumer group): nothing.
//
// An offset that an open transaction is about to commit does not expire. A group left Empty
// with no members, no offsets and no pending transactional offsets is removed (Dead), with its
// record: a later group of that name starts at generation 0, as in Kafka.
//
// Both times are stored (the offset's commit time in its value, the time an Empty group
// emptied in its record), so expiry goes on across restarts. A group whose record was saved
// while it had members that a restart does not bring back (any state but Stable), or before
// state times were kept, is Empty from that start-up on.

func (c *Coordinator) expireLoop(every time.Duration) {
	defer c.done.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	// The first pass is one interval after start-up, not at once: a group that was
	// rebalancing at a restart comes back Empty without members (only a Stable record keeps
	// them), and removing it before they rejoin answers their JoinGroup UNKNOWN_MEMBER_ID
	// (franz-go's TestTxnEtl under SIGKILLs failed about one run in two that way).
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.ExpireOffsets(c.cfg.Now())
	}
}

// ExpireOffsets removes the offsets expired at now and the groups left empty by it, durably,
// and returns how many offsets and groups it removed.
func (c *Coordinator) ExpireOffsets(now time.Time) (offsets, groups int) {
	if c.cfg.OffsetsRetention < 0 {
		return 0, 0
	}
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	nowMs := now.UnixMilli()
	for _, g := range gs {
		select {
		case <-c.stop:
			return offsets, groups
		default:
		}
		g.mu.Lock()
		n, removed := g.expire(nowMs)
		g.mu.Unlock()
		offsets += n
		if removed {
			groups++
		}
	}
	if offsets > 0 || groups > 0 {
		c.log.Info("groups: expired committed offsets (offsets.retention.minutes)", "offsets", offsets, "groups", groups)
	}
	return offsets, groups
}

// expire runs under g.mu: it deletes g's expired offsets and, if that leaves it empty, g.
func (g *group) expire(nowMs int64) (int, bool) {
	c := g.c
	if g.state == Dead {
		return 0, false
	}
	retention := c.cfg.OffsetsRetention.Milliseconds()
	var subscribed map[string]bool
	switch {
	case g.state == Empty && len(g.members) == 0:
	case g.state == Stable && g.protocolType == "consumer":
		subscribed = map[string]bool{}
		if g.cg != nil {
			subscribed = g.cg.subscribedTopics()
		}
		for _, m := range g.members {
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
				return 0, false // subscriptions unknown: Kafka expires nothing then
			}
			for _, t := range meta.Topics {
				subscribed[t] = true
			}
		}
	default:
		return 0, false
	}
	var del []meta.OffsetKey
	for k, o := range g.offsets {
		base := o.CommitTime
		if subscribed == nil && g.protocolType != "" {
			base = max(base, g.stateMs)
		}
		if subscribed[k.Topic] || nowMs-base < retention {
			continue
		}
		if c.cfg.PendingTxnOffset != nil && c.cfg.PendingTxnOffset(g.name, k.Topic, k.Partition) {
			continue
		}
		del = append(del, k)
	}
	if len(del) > 0 {
		if err := c.store.DeleteOffsets(g.name, del); err != nil {
			c.log.Error("groups: delete expired offsets", "group", g.name, "err", err)
			return 0, false
		}
		for _, k := range del {
			delete(g.offsets, k)
			delete(g.committedAt, k)
		}
	}
	if g.state != Empty || len(g.members) > 0 || len(g.pending) > 0 || len(g.offsets) > 0 ||
		c.cfg.PendingTxnGroup != nil && c.cfg.PendingTxnGroup(g.name) {
		return len(del), false
	}
	if err := c.store.DeleteGroup(g.name); err != nil {
		c.log.Error("groups: delete expired group", "group", g.name, "err", err)
		return len(del), false
	}
	g.state = Dead
	c.mu.Lock()
	if c.groups[g.name] == g {
		delete(c.groups, g.name)
	}
	c.mu.Unlock()
	return len(del), true
}
