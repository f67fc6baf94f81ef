package server

import (
	"sync"
	"sync/atomic"

	"inlet/groups"
)

// Groups per principal (max.groups.per.principal; Kafka and Redpanda have no such bound):
// the groups a principal's requests created since the node started, kept here, beside the
// coordinator, which knows no principals. A request that would create a group (OffsetCommit
// with generation -1, JoinGroup without a member id, TxnOffsetCommit, ConsumerGroupHeartbeat
// at member epoch 0) from a principal holding the bound is refused POLICY_VIOLATION
// (groups.ErrGroupBound), as the node's bound (groups.Config.MaxGroups) is. Groups that have
// gone since (deleted, expired) are forgotten when the bound is reached. Who created a group
// is not stored: after a restart the groups loaded count against the node's bound only. A
// principal's concurrent requests, on several connections, may each pass the check before
// any has created its group, so it can go past the bound by its number of connections.

type groupOwners struct {
	mu      sync.Mutex
	by      map[string]map[string]struct{} // principal -> groups its requests created
	refused atomic.Uint64
}

// admitGroup reports whether r may go on to its call, which creates group if it is not there
// and creates is set: existed tells that there is nothing to record after the call.
func (s *Server) admitGroup(r *request, group string, creates bool) (existed, ok bool) {
	max := s.cfg.MaxGroupsPerPrincipal
	if max <= 0 || !creates || s.groups.Exists(group) {
		return true, true
	}
	o := &s.groupOwners
	p := r.c.User()
	o.mu.Lock()
	defer o.mu.Unlock()
	mine := o.by[p]
	if len(mine) >= max {
		for g := range mine {
			if !s.groups.Exists(g) {
				delete(mine, g)
			}
		}
	}
	if len(mine) >= max {
		o.refused.Add(1)
		return false, false
	}
	return false, true
}

// ownGroup records that r's call created group, when it did.
func (s *Server) ownGroup(r *request, group string, existed bool) {
	if existed || !s.groups.Exists(group) {
		return
	}
	o := &s.groupOwners
	p := r.c.User()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by == nil {
		o.by = map[string]map[string]struct{}{}
	}
	if o.by[p] == nil {
		o.by[p] = map[string]struct{}{}
	}
	o.by[p][group] = struct{}{}
}

// errGroupBound is the code of a group creation refused by a bound.
const errGroupBound = groups.ErrGroupBound
