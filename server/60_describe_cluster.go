package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// DescribeCluster v0-v1 (KIP-700): this node, the controller, and the other nodes of its
// bucket prefix (Config.Nodes), as Metadata lists them. v2 (fenced brokers) is not
// advertised.
const describeClusterKey = 60

func init() {
	register(api{key: describeClusterKey, min: 0, max: 1, handle: handleDescribeCluster,
		authz: unchecked("the brokers are no secret (Metadata lists them); KIP-430's operations are the principal's own")})
}

func handleDescribeCluster(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	// KIP-919: a broker asked for controller endpoints answers MISMATCHED_ENDPOINT_TYPE; an
	// endpoint type Kafka does not know, UNSUPPORTED_ENDPOINT_TYPE.
	switch {
	case req.Version < 1 || req.EndpointType == 1:
	case req.EndpointType == 2:
		resp.ErrorCode = wire.ErrMismatchedEndpointType
		return resp, nil
	default:
		resp.ErrorCode = wire.ErrUnsupportedEndpointType
		return resp, nil
	}
	resp.EndpointType = 1
	resp.ClusterID = s.blog.Meta().ClusterID()
	resp.ControllerID = s.cfg.NodeID
	resp.ClusterAuthorizedOperations = authorizedOperationsOmitted
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = s.subjectOf(r).Operations(acl.Cluster, acl.ClusterName) // KIP-430
	}
	b := kmsg.NewDescribeClusterResponseBroker()
	b.Host, b.Port = r.c.Advertised() // the request's listener's, as Metadata
	b.NodeID = s.cfg.NodeID
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	for _, n := range s.otherNodes() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = n.ID, n.Host, n.Port
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp, nil
}
