package server

// The cluster a client is shown. Every node that may write this node's bucket prefix is a
// broker of it (Config.Nodes): Metadata and DescribeCluster list them all, this node as the
// controller and the leader of every partition, its replicas and ISR, the others at their
// addresses, so that a client that loses this node already knows the node that takes the
// prefix over (a standby answers it: package server/standby). Every partition's leader epoch
// is the held lease's epoch (Config.LeaderEpoch), which rises at every takeover: a client
// that saw an earlier writer is told FENCED_LEADER_EPOCH by this one, and one that already
// saw a later writer UNKNOWN_LEADER_EPOCH from this one (KIP-320; read.CheckLeaderEpoch).
//
// The batches keep the epoch the log stamps into them (batchlog.Partition.LeaderEpoch, 0),
// which is never above the epoch reported here: Kafka's older batches, written under
// earlier leaders, carry lower epochs too.

// leaderEpoch is every partition's leader epoch now (Config.LeaderEpoch; 0 without one).
func (s *Server) leaderEpoch() int32 {
	if f := s.cfg.LeaderEpoch; f != nil {
		return f()
	}
	return 0
}

// otherNodes is Config.Nodes without this node: the brokers listed after it.
func (s *Server) otherNodes() []Node {
	var out []Node
	for _, n := range s.cfg.Nodes {
		if n.ID != s.cfg.NodeID {
			out = append(out, n)
		}
	}
	return out
}
