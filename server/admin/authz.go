package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/server/errresp"
	"inlet/wire"
)

// Authorization is declared where each API is registered (its NN_name.go file), with
// package authz; the shorthands below declare for this package's APIs, whose filters take
// the admin Server.

func onTopics(op acl.Operation) authz.Need  { return authz.OnTopics(op) }
func onCluster(op acl.Operation) authz.Need { return authz.OnCluster(op) }

func before(filter authz.Filter[*Server], needs ...authz.Need) authz.Decl[*Server] {
	return authz.Before(filter, needs...)
}

func inHandler(needs ...authz.Need) authz.Decl[*Server] { return authz.InHandler[*Server](needs...) }

// The filters of the configuration APIs (a topic resource needs the operation; broker
// resources are the handlers') and of the cluster-wide ones (CLUSTER_AUTHORIZATION_FAILED).

// authorizeDescribeConfigs: DESCRIBE_CONFIGS on each topic resource.
func authorizeDescribeConfigs(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	var denied []kmsg.DescribeConfigsRequestResource
	req.Resources, denied = authz.SplitAllowed(req.Resources, func(rs kmsg.DescribeConfigsRequestResource) bool {
		return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.Topic(acl.DescribeConfigs, rs.ResourceName)
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
func authorizeAlterConfigs(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	var denied []kmsg.AlterConfigsRequestResource
	req.Resources, denied = authz.SplitAllowed(req.Resources, func(rs kmsg.AlterConfigsRequestResource) bool {
		return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.Topic(acl.AlterConfigs, rs.ResourceName)
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
func authorizeIncrementalAlterConfigs(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	var denied []kmsg.IncrementalAlterConfigsRequestResource
	req.Resources, denied = authz.SplitAllowed(req.Resources, func(rs kmsg.IncrementalAlterConfigsRequestResource) bool {
		return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.Topic(acl.AlterConfigs, rs.ResourceName)
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
func authorizeElectLeaders(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if !p.Cluster(acl.Alter) {
		return errresp.For(kreq, wire.ErrClusterAuthorizationFailed), nil
	}
	return nil, nil
}

// authorizeAlterPartitionAssignments: ALTER on the cluster.
func authorizeAlterPartitionAssignments(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	if !p.Cluster(acl.Alter) {
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.ErrorCode = wire.ErrClusterAuthorizationFailed
		return resp, nil
	}
	return nil, nil
}

// authorizeListPartitionReassignments: DESCRIBE on the cluster.
func authorizeListPartitionReassignments(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if !p.Cluster(acl.Describe) {
		return errresp.For(kreq, wire.ErrClusterAuthorizationFailed), nil
	}
	return nil, nil
}

// authorizeUpdateFeatures: ALTER on the cluster.
func authorizeUpdateFeatures(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if !p.Cluster(acl.Alter) {
		return errresp.For(kreq, wire.ErrClusterAuthorizationFailed), nil
	}
	return nil, nil
}
