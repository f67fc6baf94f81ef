package server

import (
	"inlet/groups"
	"inlet/metrics"
	"inlet/server/admin"
)

// What the metrics' state collector reads at scrape time (metrics.Node). Request counts,
// latencies, errors and bytes are counted as they happen instead, through Config.Metrics:
// in conn's enqueue (a frame's arrival), handle (which API), release (a request done),
// the produce completion (request.Completed: produce error codes) and the transport's replies (bytes
// out: transport.Config.Sent).

var _ metrics.Node = (*Server)(nil)

// InflightBudget is the budget's bytes held now and its limit.
func (s *Server) InflightBudget() (used, limit int64) { return s.net.InflightBudget() }

// OpenConnections counts open client connections by listener name.
func (s *Server) OpenConnections() map[string]int { return s.net.OpenConnections() }

// Refusals counts refused or closed connections by reason since start.
func (s *Server) Refusals() map[string]int64 { return s.net.Refusals() }

// ProtocolErrors counts connections closed for a bad frame since start.
func (s *Server) ProtocolErrors() int64 { return s.net.ProtocolErrors() }

// PlainDerivations is how many PBKDF2 derivations SASL PLAIN logins have run since start: what
// the cache of verified passwords and package conn's per-address buckets bound. Refusals
// counts the attempts refused without one.
func (s *Server) PlainDerivations() int64 { return s.cfg.Users.PlainDerivations() }

// CommittedOffsets lists every consumer group's committed offsets.
func (s *Server) CommittedOffsets() []groups.CommittedOffset { return s.groups.CommittedOffsets() }

// Transactions counts transactional ids by state and the transactions ended since start.
func (s *Server) Transactions() (map[string]int, map[string]int64) {
	byState := map[string]int{}
	for _, d := range s.txns.List() {
		byState[d.State.String()]++
	}
	return byState, s.txns.Ended()
}

// LimitCounts is what the bounds on client-made state hold and refused (metrics.LimitCounts;
// admin/limits.go, groups.Config.MaxGroups).
func (s *Server) LimitCounts() metrics.LimitCounts {
	pb, mq := admin.Refusals()
	lc := metrics.LimitCounts{PartitionBound: pb, MutationQuota: mq}
	if s.groups != nil {
		lc.Groups, lc.GroupBound = s.groups.GroupCount(), s.groups.Refused()+s.groupOwners.refused.Load()
	}
	return lc
}
