package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// Authorization is declared where each API is registered (its NN_name.go file): api.authz
// names the resource types and operations the API checks (Kafka's table in KafkaApis), and
// either a filter that applies them to the decoded request before the handler (before), or
// that the handler checks them itself (inHandler: Produce's hand-written path, the
// transaction and admin APIs), or why nothing is checked (unchecked: the APIs served before
// authentication). A registered API without a declaration fails
// TestEveryAPIDeclaresAuthorization. Every check, wherever made, is subject.may (acls.go):
// one evaluator, package acl.
//
// A filter runs for restricted subjects only: entries naming a topic, group or
// transactional id the principal may not use are taken out of the request, so the handler
// neither sees nor auto-creates them, and the returned deny function adds them back to the
// response with Kafka's authorization error (TOPIC_AUTHORIZATION_FAILED per partition for
// the topic-naming APIs). Requests about a single group or transactional id that is refused
// are answered at once (the first result), without calling the handler. Listings are
// filtered to what the principal may DESCRIBE (KafkaApis does the same).
//
// The rule every filter keeps: an answer about a name the principal may not use never
// depends on whether it exists (Kafka checks authorization before the metadata cache), so
// the entry is taken out before the handler can look it up. The group and transaction APIs
// that also name topics check each topic as well as the group or id.
// TestTenantLearnsNothingOutsideItsPrefix and TestDeniedDescribeLearnsNothing (e2e) ask the
// APIs about names the principal may not describe and about names that exist nowhere, and
// compare the answers.

// need is one check an API makes: op on each named resource of type rt (or on the cluster).
type need struct {
	rt acl.ResourceType
	op acl.Operation
}

func onTopics(op acl.Operation) need  { return need{acl.Topic, op} }
func onGroups(op acl.Operation) need  { return need{acl.Group, op} }
func onTxnIDs(op acl.Operation) need  { return need{acl.TransactionalID, op} }
func onCluster(op acl.Operation) need { return need{acl.Cluster, op} }

// authz is an API's declaration.
type authz struct {
	needs []need
	// filter applies needs to a decoded request before the handler, for restricted subjects.
	filter func(s *Server, p subject, req kmsg.Request) (kmsg.Response, func(kmsg.Response))
	// inHandler: the handler checks needs itself.
	inHandler bool
	// unchecked says why the API checks nothing.
	unchecked string
}

func before(filter func(s *Server, p subject, req kmsg.Request) (kmsg.Response, func(kmsg.Response)), needs ...need) authz {
	return authz{needs: needs, filter: filter}
}

func inHandler(needs ...need) authz { return authz{needs: needs, inHandler: true} }

func unchecked(why string) authz { return authz{unchecked: why} }

// declared tells whether a is a complete declaration (what the test checks).
func (a authz) declared() bool {
	if a.unchecked != "" {
		return len(a.needs) == 0 && a.filter == nil && !a.inHandler
	}
	return len(a.needs) > 0 && (a.filter != nil) != a.inHandler
}

// The filters of the configuration APIs (a topic resource needs the operation; broker
// resources are the handlers') and of the cluster-wide ones (CLUSTER_AUTHORIZATION_FAILED).

// authorizeDescribeConfigs: DESCRIBE_CONFIGS on each topic resource.
func authorizeDescribeConfigs(s *Server, p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	var denied []kmsg.DescribeConfigsRequestResource
	req.Resources, denied = splitAllowed(req.Resources, func(rs kmsg.DescribeConfigsRequestResource) bool {
		return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.topic(acl.DescribeConfigs, rs.ResourceName)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.DescribeConfigsResponse)
		for _, rs := range denied {
			o := kmsg.NewDescribeConfigsResponseResource()
			o.ResourceType, o.ResourceName, o.ErrorCode = rs.ResourceType, rs.ResourceName, wire.ErrTopicAuthorizationFailed
			resp.Resources = append(resp.Resources, o)
		}
	}
}

// authorizeAlterConfigs: ALTER_CONFIGS on each topic resource.
func authorizeAlterConfigs(s *Server, p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	var denied []kmsg.AlterConfigsRequestResource
	req.Resources, denied = splitAllowed(req.Resources, func(rs kmsg.AlterConfigsRequestResource) bool {
		return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.topic(acl.AlterConfigs, rs.ResourceName)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.AlterConfigsResponse)
		for _, rs := range denied {
			o := kmsg.NewAlterConfigsResponseResource()
			o.ResourceType, o.ResourceName, o.ErrorCode = rs.ResourceType, rs.ResourceName, wire.ErrTopicAuthorizationFailed
			resp.Resources = append(resp.Resources, o)
		}
	}
}

// authorizeIncrementalAlterConfigs: ALTER_CONFIGS on each topic resource.
func authorizeIncrementalAlterConfigs(s *Server, p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	var denied []kmsg.IncrementalAlterConfigsRequestResource
	req.Resources, denied = splitAllowed(req.Resources, func(rs kmsg.IncrementalAlterConfigsRequestResource) bool {
		return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.topic(acl.AlterConfigs, rs.ResourceName)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, rs := range denied {
			o := kmsg.NewIncrementalAlterConfigsResponseResource()
			o.ResourceType, o.ResourceName, o.ErrorCode = rs.ResourceType, rs.ResourceName, wire.ErrTopicAuthorizationFailed
			resp.Resources = append(resp.Resources, o)
		}
	}
}

// authorizeElectLeaders: ALTER on the cluster.
func authorizeElectLeaders(s *Server, p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	if !p.cluster(acl.Alter) {
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = wire.ErrClusterAuthorizationFailed
		for _, rt := range req.Topics {
			ot := kmsg.NewElectLeadersResponseTopic()
			ot.Topic = rt.Topic
			for _, i := range rt.Partitions {
				op := kmsg.NewElectLeadersResponseTopicPartition()
				op.Partition, op.ErrorCode = i, wire.ErrClusterAuthorizationFailed
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp, nil
	}
	return nil, nil
}

// authorizeAlterPartitionAssignments: ALTER on the cluster.
func authorizeAlterPartitionAssignments(s *Server, p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	if !p.cluster(acl.Alter) {
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.ErrorCode = wire.ErrClusterAuthorizationFailed
		return resp, nil
	}
	return nil, nil
}

// authorizeListPartitionReassignments: DESCRIBE on the cluster.
func authorizeListPartitionReassignments(s *Server, p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	if !p.cluster(acl.Describe) {
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode = wire.ErrClusterAuthorizationFailed
		return resp, nil
	}
	return nil, nil
}

// authorizeUpdateFeatures: ALTER on the cluster.
func authorizeUpdateFeatures(s *Server, p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.UpdateFeaturesRequest)
	if !p.cluster(acl.Alter) {
		resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
		resp.ErrorCode = wire.ErrClusterAuthorizationFailed
		for _, u := range req.FeatureUpdates {
			res := kmsg.NewUpdateFeaturesResponseResult()
			res.Feature, res.ErrorCode = u.Feature, wire.ErrClusterAuthorizationFailed
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}
	return nil, nil
}

// splitAllowed separates the entries of a request that pass allowed from the others, keeping
// order. kept reuses xs's backing array (each entry is read before its slot is rewritten);
// denied is a new slice, so both stay valid.
func splitAllowed[T any](xs []T, allowed func(T) bool) (kept, denied []T) {
	kept = xs[:0]
	for _, x := range xs {
		if allowed(x) {
			kept = append(kept, x)
		} else {
			denied = append(denied, x)
		}
	}
	return kept, denied
}
