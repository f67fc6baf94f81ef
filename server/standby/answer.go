package standby

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
	"inlet/server/errresp"
	"inlet/wire"
)

// The API keys the front answers itself; every other served key is answered with an error
// (refusals).
const (
	produceKey          = 0
	metadataKey         = 3
	findCoordinatorKey  = 10
	listGroupsKey       = 16
	saslHandshakeKey    = 17
	apiVersionsKey      = 18
	saslAuthenticateKey = 36
	describeClusterKey  = 60
	listTransactionsKey = 66
)

// authorizedOperationsOmitted is Integer.MIN_VALUE: KIP-430's "not requested".
const authorizedOperationsOmitted = -2147483648

// refusals is the error each served API the front does not answer itself is refused with:
// the partition APIs NOT_LEADER_OR_FOLLOWER (the writer leads every partition), the group and
// transaction coordinator's NOT_COORDINATOR (it is the coordinator of all), and NOT_CONTROLLER
// for the rest, the admin APIs (it is the controller). Each is retriable: the client refreshes
// its metadata or finds the coordinator again, through the front, which names the writer.
var refusals = map[int16]int16{
	0:  wire.ErrNotLeaderOrFollower, // Produce
	1:  wire.ErrNotLeaderOrFollower, // Fetch
	2:  wire.ErrNotLeaderOrFollower, // ListOffsets
	21: wire.ErrNotLeaderOrFollower, // DeleteRecords (sent to each partition's leader)
	23: wire.ErrNotLeaderOrFollower, // OffsetForLeaderEpoch
	61: wire.ErrNotLeaderOrFollower, // DescribeProducers

	8:  wire.ErrNotCoordinator, // OffsetCommit
	9:  wire.ErrNotCoordinator, // OffsetFetch
	11: wire.ErrNotCoordinator, // JoinGroup
	12: wire.ErrNotCoordinator, // Heartbeat
	13: wire.ErrNotCoordinator, // LeaveGroup
	14: wire.ErrNotCoordinator, // SyncGroup
	15: wire.ErrNotCoordinator, // DescribeGroups
	22: wire.ErrNotCoordinator, // InitProducerId
	24: wire.ErrNotCoordinator, // AddPartitionsToTxn
	25: wire.ErrNotCoordinator, // AddOffsetsToTxn
	26: wire.ErrNotCoordinator, // EndTxn
	28: wire.ErrNotCoordinator, // TxnOffsetCommit
	42: wire.ErrNotCoordinator, // DeleteGroups
	47: wire.ErrNotCoordinator, // OffsetDelete
	65: wire.ErrNotCoordinator, // DescribeTransactions
	68: wire.ErrNotCoordinator, // ConsumerGroupHeartbeat
	69: wire.ErrNotCoordinator, // ConsumerGroupDescribe
}

// refusal is key's error when the front does not answer it itself.
func refusal(key int16) int16 {
	if code, ok := refusals[key]; ok {
		return code
	}
	return kerr.NotController.Code
}

// respond is the frame answering the request hdr heads, body its bytes after the header;
// an error closes the connection.
func (f *Front) respond(hdr wire.RequestHeader, body []byte) ([]byte, error) {
	v, ok := f.versions[hdr.APIKey]
	if !ok || hdr.APIVersion < v[0] || hdr.APIVersion > v[1] {
		if hdr.APIKey == apiVersionsKey && ok && hdr.APIVersion > v[1] {
			// KIP-511: a version the node does not know is answered v0, UNSUPPORTED_VERSION,
			// with the versions it does.
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ErrorCode, resp.ApiKeys = wire.ErrUnsupportedVersion, f.apis
			hdr.APIVersion = 0
			return encode(hdr, resp), nil
		}
		return nil, fmt.Errorf("api key %d v%d is not served", hdr.APIKey, hdr.APIVersion)
	}
	req := kmsg.RequestForKey(hdr.APIKey)
	req.SetVersion(hdr.APIVersion)
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("api key %d v%d: %w", hdr.APIKey, hdr.APIVersion, err)
	}
	deadline := time.Now().Add(f.cfg.ForwardTimeout)
	forwarded := string(hdr.ClientID) == forwardedClientID
	switch hdr.APIKey {
	case apiVersionsKey:
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = f.apis
		if hdr.APIVersion >= 3 {
			resp.SupportedFeatures, resp.FinalizedFeatures = f.cfg.SupportedFeatures, f.cfg.FinalizedFeatures
		}
		return encode(hdr, resp), nil
	case metadataKey:
		if !forwarded {
			resp := kmsg.NewPtrMetadataResponse()
			if rb, ok := f.forward(hdr.APIKey, hdr.APIVersion, body, resp, func(n server.Node) bool { return resp.ControllerID == n.ID }, deadline); ok {
				f.remember(req.(*kmsg.MetadataRequest), resp)
				return relay(hdr, rb), nil
			}
		}
		return encode(hdr, f.metadataFallback(req.(*kmsg.MetadataRequest))), nil
	case describeClusterKey:
		if !forwarded {
			resp := kmsg.NewPtrDescribeClusterResponse()
			if rb, ok := f.forward(hdr.APIKey, hdr.APIVersion, body, resp, func(n server.Node) bool { return resp.ControllerID == n.ID }, deadline); ok {
				return relay(hdr, rb), nil
			}
		}
		return encode(hdr, f.describeClusterFallback(req.(*kmsg.DescribeClusterRequest))), nil
	case findCoordinatorKey:
		var w server.Node
		found := false
		if !forwarded {
			w, found = f.findWriter(deadline)
		}
		return encode(hdr, findCoordinator(req.(*kmsg.FindCoordinatorRequest), w, found)), nil
	case produceKey:
		if req.(*kmsg.ProduceRequest).Acks == 0 {
			// acks=0 is never answered: Kafka closes the connection on an error instead, and
			// the client refreshes its metadata.
			return nil, fmt.Errorf("produce with acks=0 to a standby")
		}
	case listGroupsKey, listTransactionsKey:
		// Kafka's answer from a broker that coordinates no group or transaction: none.
		return encode(hdr, req.ResponseKind()), nil
	case saslHandshakeKey, saslAuthenticateKey:
		return nil, fmt.Errorf("SASL on a listener without SASL")
	}
	resp := errresp.For(req, refusal(hdr.APIKey))
	if resp == nil {
		return nil, fmt.Errorf("BUG: standby: no error response for api key %d", hdr.APIKey)
	}
	return encode(hdr, resp), nil
}

// relay is the writer's response body rb answering hdr.
func relay(hdr wire.RequestHeader, rb []byte) []byte {
	b := wire.AppendResponseHeader(make([]byte, 0, 9+len(rb)), hdr.CorrelationID, wire.ResponseHeaderFlexible(hdr.APIKey, hdr.APIVersion))
	b = append(b, rb...)
	wire.PatchFrameLength(b)
	return b
}

// knownTopic is what the front keeps of a topic from the writer's Metadata answers.
type knownTopic struct {
	id         [16]byte
	partitions int32
	internal   bool
}

// remember keeps the topics and cluster id of the writer's answer to req, for the answers
// while no writer answers: an answer of every topic replaces what was kept.
func (f *Front) remember(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	f.lastMu.Lock()
	defer f.lastMu.Unlock()
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) || f.topics == nil {
		f.topics = map[string]knownTopic{}
	}
	if resp.ClusterID != nil {
		f.clusterID = resp.ClusterID
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		f.topics[*t.Topic] = knownTopic{id: t.TopicID, partitions: int32(len(t.Partitions)), internal: t.IsInternal}
	}
}

// brokers are the nodes of --cluster-nodes as Metadata lists them.
func (f *Front) brokers() []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, n := range f.cfg.Nodes {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = n.ID, n.Host, n.Port
		out = append(out, b)
	}
	return out
}

// metadataFallback answers Metadata while no writer answers: the nodes of --cluster-nodes, no
// controller (-1), and every partition of the topics asked for (every topic the writer last
// told of, for "all") without a leader: LEADER_NOT_AVAILABLE, leader -1, as Kafka answers
// while no leader is elected (MetadataCache.getPartitionMetadata). A topic the front was never
// told of is LEADER_NOT_AVAILABLE as a whole, as Kafka answers for a topic being created:
// each is retriable, and the client asks again.
func (f *Front) metadataFallback(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = f.brokers()
	resp.ControllerID = -1
	resp.AuthorizedOperations = authorizedOperationsOmitted
	f.lastMu.Lock()
	defer f.lastMu.Unlock()
	resp.ClusterID = f.clusterID
	topic := func(name string, k knownTopic) kmsg.MetadataResponseTopic {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID, t.IsInternal = kmsg.StringPtr(name), k.id, k.internal
		t.AuthorizedOperations = authorizedOperationsOmitted
		for p := range k.partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = p, -1, -1
			mp.ErrorCode = wire.ErrLeaderNotAvailable
			mp.Replicas, mp.ISR = []int32{}, []int32{}
			t.Partitions = append(t.Partitions, mp)
		}
		return t
	}
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for name, k := range f.topics {
			resp.Topics = append(resp.Topics, topic(name, k))
		}
		return resp
	}
	for _, rt := range req.Topics {
		found := false
		for name, k := range f.topics {
			if (rt.Topic != nil && *rt.Topic == name) || (rt.Topic == nil && rt.TopicID == k.id) {
				resp.Topics = append(resp.Topics, topic(name, k))
				found = true
				break
			}
		}
		if !found {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, wire.ErrLeaderNotAvailable
			t.AuthorizedOperations = authorizedOperationsOmitted
			resp.Topics = append(resp.Topics, t)
		}
	}
	return resp
}

// describeClusterFallback answers DescribeCluster while no writer answers: the nodes of
// --cluster-nodes and no controller.
func (f *Front) describeClusterFallback(req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	for _, n := range f.cfg.Nodes {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = n.ID, n.Host, n.Port
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ControllerID = -1
	resp.ClusterAuthorizedOperations = authorizedOperationsOmitted
	f.lastMu.Lock()
	if f.clusterID != nil {
		resp.ClusterID = *f.clusterID
	}
	f.lastMu.Unlock()
	return resp
}

// findCoordinator names the writer, the coordinator of every group and transactional id, for
// each key asked (v4+: several, KIP-699), or COORDINATOR_NOT_AVAILABLE (retriable) when no
// writer answers.
func findCoordinator(req *kmsg.FindCoordinatorRequest, w server.Node, found bool) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	node, host, port, code := w.ID, w.Host, w.Port, int16(0)
	if !found {
		node, host, port, code = -1, "", -1, wire.ErrCoordinatorNotAvailable
	}
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = node, host, port, code
		return resp
	}
	for _, k := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port, c.ErrorCode = k, node, host, port, code
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
