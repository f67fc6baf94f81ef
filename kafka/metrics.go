package kafka

import (
	"inlet/groups"
	"inlet/metrics"
)

// What the metrics' state collector reads at scrape time (metrics.Node). Request counts,
// latencies, errors and bytes are counted as they happen instead, through Config.Metrics:
// in conn.enqueue (a frame's arrival), handle (which API), release (a request done),
// the produce completion (request.Completed: produce error codes) and the transport's replies (bytes
// out: transport.Config.Sent).

var _ metrics.Node = (*Server)(nil)

// InflightBudget is the budget's bytes held now and its limit.
func (s *Server) InflightBudget() (used, limit int64) {
	return s.tr.BudgetHeld(), s.cfg.InflightBudget
}

// OpenConnections counts open client connections by listener name.
func (s *Server) OpenConnections() map[string]int {
	out := map[string]int{}
	if s.gnetL != nil {
		out[s.gnetL.Name] = 0
	}
	for _, l := range s.streams {
		out[l.Name] = 0
	}
	t := &s.connTab
	t.mu.Lock()
	for c := range t.all {
		if c.l != nil {
			out[c.l.Name]++
		}
	}
	t.mu.Unlock()
	return out
}

// Refusals counts refused or closed connections by reason since start.
func (s *Server) Refusals() map[string]int64 {
	t := &s.connTab
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.refused))
	for r, n := range t.refused {
		out[r] = n
	}
	return out
}

// ProtocolErrors counts connections closed for a bad frame since start.
func (s *Server) ProtocolErrors() int64 { return s.badFrames.Load() }

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
