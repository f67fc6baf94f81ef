package server

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
)

// ListGroups v0-v5: v4 filters by state (KIP-518), v5 by group type (KIP-848: "classic" or
// "consumer"; a consumer group's state is Empty, Assigning, Reconciling or Stable).
const listGroupsKey = 16

func init() {
	register(api{key: listGroupsKey, min: 0, max: 5, handle: handleListGroups,
		authz: before(authorizeListGroups, onCluster(acl.Describe), onGroups(acl.Describe))})
}

func handleListGroups(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	for _, g := range s.groups.List() {
		if !match(req.StatesFilter, g.StateName) || !match(req.TypesFilter, g.Type) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Name, g.ProtocolType, g.StateName, g.Type
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}

// authorizeListGroups: every group with DESCRIBE on the cluster, else those the principal may
// describe.
func authorizeListGroups(s *Server, p authz.Subject, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	// KafkaApis.handleListGroupsRequest: every group with DESCRIBE on the cluster, else
	// those the principal may describe.
	if p.Cluster(acl.Describe) {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.ListGroupsResponse)
		out := resp.Groups[:0]
		for _, g := range resp.Groups {
			if p.Group(acl.Describe, g.Group) {
				out = append(out, g)
			}
		}
		resp.Groups = out
	}
}
