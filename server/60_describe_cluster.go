package server

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeCluster v0-v1 (KIP-700): the one broker, which is also the controller. v2 (fenced
// brokers) is not advertised.
const describeClusterKey = 60

func init() {
	register(api{key: describeClusterKey, min: 0, max: 1, handle: handleDescribeCluster})
}

func handleDescribeCluster(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = 114 // UNSUPPORTED_ENDPOINT_TYPE: only broker endpoints exist
		return resp, nil
	}
	resp.EndpointType = 1
	resp.ClusterID = s.blog.ClusterID()
	resp.ControllerID = s.cfg.NodeID
	resp.ClusterAuthorizedOperations = authorizedOperationsOmitted
	b := kmsg.NewDescribeClusterResponseBroker()
	b.Host, b.Port = s.advertised(r.c) // the request's listener's, as Metadata
	b.NodeID = s.cfg.NodeID
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	return resp, nil
}
