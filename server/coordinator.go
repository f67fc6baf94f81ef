package server

import (
	"time"

	"inlet/groups"
)

// The node is its own group and transaction coordinator (one broker: FindCoordinator always
// names it). Group state lives in package groups; committed offsets in the batch log.

func (s *Server) startGroups() error {
	delay := max(s.cfg.GroupInitialRebalanceDelay, 0) // negative: none
	var store groups.Store = s.meta
	if s.cfg.GroupStore != nil {
		store = s.cfg.GroupStore(s.meta)
	}
	c, err := groups.New(store, groups.Config{
		Logger:                s.log,
		InitialRebalanceDelay: time.Duration(delay),
		OffsetsRetention:      s.cfg.OffsetsRetention,
		Consumer:              s.consumerGroupConfig(),
		MaxGroups:             s.cfg.MaxGroups,
		// Offsets an open transaction holds do not expire (s.txns is set before Start).
		PendingTxnOffset: func(group, topic string, partition int32) bool { return s.txns.PendingOffset(group, topic, partition) },
		PendingTxnGroup:  func(group string) bool { return s.txns.PendingGroup(group) },
		PartitionExists: func(topic string, partition int32) bool {
			t, ok := s.blog.Topic(topic)
			return ok && partition >= 0 && int(partition) < len(t.Partitions)
		},
	})
	if err != nil {
		return err
	}
	s.groups = c
	return nil
}

// clientIDHost is the client id and host DescribeGroups reports for a member.
func clientIDHost(r *request) (string, string) {
	return string(r.hdr.ClientID), "/" + r.c.IP()
}
