package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/server/authz"
	"inlet/wire"
)

// Metadata v0-v12. The node presents itself as the controller and the leader of every
// partition (replicas and ISR = itself) at the leader epoch Config.LeaderEpoch gives, and
// lists the other nodes of its bucket prefix (Config.Nodes) as brokers (cluster.go). v10+ carries topic ids; requests by
// topic id alone (v12) are answered UNKNOWN_TOPIC_ID for ids that are not known. v8+ answers
// KIP-430's authorized operations when asked.
const metadataKey = 3

func init() {
	register(api{key: metadataKey, min: 0, max: 12, handle: handleMetadata,
		authz: before(authorizeMetadata, onTopics(acl.Describe), onTopics(acl.Create), onCluster(acl.Create))})
}

// authorizedOperationsOmitted is Integer.MIN_VALUE: "not requested".
const authorizedOperationsOmitted = -2147483648

func handleMetadata(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = s.cfg.NodeID
	b.Host, b.Port = r.c.Advertised()
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	for _, n := range s.otherNodes() {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = n.ID, n.Host, n.Port
		resp.Brokers = append(resp.Brokers, b)
	}
	epoch := s.leaderEpoch()
	cid := s.blog.Meta().ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = s.cfg.NodeID
	resp.AuthorizedOperations = authorizedOperationsOmitted

	// v0: an empty list means every topic. v1+: null means every topic, empty means none.
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.blog.Topics() {
			resp.Topics = append(resp.Topics, s.metadataTopic(t.Name, 0, t, epoch))
		}
		metadataAuthorizedOperations(s.subjectOf(r), req, resp)
		return resp, nil
	}
	// Before v4 there is no AllowAutoTopicCreation field and brokers auto-create.
	create := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = wire.ErrUnknownTopicID
			for _, t := range s.blog.Topics() {
				if t.ID == rt.TopicID {
					mt = s.metadataTopic(t.Name, 0, t, epoch)
				}
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		t, code, created := s.topicFor(r, []byte(*rt.Topic), create)
		if created {
			// Kafka answers the request that created a topic with LEADER_NOT_AVAILABLE and no
			// partitions (its controller has not elected leaders yet); clients ask again, and
			// those that delete and re-check a topic rely on it.
			code, t = wire.ErrLeaderNotAvailable, nil
		}
		if t == nil {
			resp.Topics = append(resp.Topics, s.metadataTopic(*rt.Topic, code, nil, epoch))
			continue
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(t.Name, 0, t, epoch))
	}
	metadataAuthorizedOperations(s.subjectOf(r), req, resp)
	return resp, nil
}

// metadataAuthorizedOperations sets KIP-430's authorized operations where asked (v8+): the
// cluster's (v8-v10) and each topic's, as the operations sub holds (every operation when it
// is unrestricted, as a broker without an authorizer). Topics the principal may not describe
// never reach the handler (authz.go), so they keep "not provided".
func metadataAuthorizedOperations(sub authz.Subject, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if req.Version < 8 {
		return
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = sub.Operations(acl.Cluster, acl.ClusterName)
	}
	if !req.IncludeTopicAuthorizedOperations {
		return
	}
	for i := range resp.Topics {
		if t := &resp.Topics[i]; t.Topic != nil {
			t.AuthorizedOperations = sub.Operations(acl.Topic, *t.Topic)
		}
	}
}

// metadataTopic describes t, its partitions led by this node at epoch, or reports code for a
// topic that could not be found or made.
func (s *Server) metadataTopic(name string, code int16, t *batchlog.Topic, epoch int32) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	n := name
	mt.Topic = &n
	mt.ErrorCode = code
	mt.AuthorizedOperations = authorizedOperationsOmitted
	if t == nil {
		return mt
	}
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal()
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = s.cfg.NodeID
		mp.LeaderEpoch = epoch
		mp.Replicas = []int32{s.cfg.NodeID}
		mp.ISR = []int32{s.cfg.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// authorizeMetadata: DESCRIBE on each named topic, CREATE for one that would be auto-created;
// a listing of every topic keeps those the principal may describe
// (KafkaApis.handleTopicMetadataRequest).
func authorizeMetadata(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.MetadataRequest)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	var denied []string
	kept := req.Topics[:0]
	// KafkaApis.getTopicMetadata: a topic that would be auto-created needs CREATE (on the
	// cluster or the topic); without it the answer is TOPIC_AUTHORIZATION_FAILED. Only
	// topics the principal may describe are looked up.
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation) && !p.Cluster(acl.Create)
	for _, t := range req.Topics {
		if t.Topic != nil && !p.Topic(acl.Describe, *t.Topic) {
			denied = append(denied, *t.Topic)
			continue
		}
		if t.Topic != nil && autoCreate && !p.Topic(acl.Create, *t.Topic) {
			if _, ok := s.blog.Topic(*t.Topic); !ok {
				denied = append(denied, *t.Topic)
				continue
			}
		}
		kept = append(kept, t)
	}
	req.Topics = kept
	emptied := !all && len(kept) == 0
	if emptied {
		req.Topics = []kmsg.MetadataRequestTopic{} // v0 would read an empty list as "all"
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.MetadataResponse)
		out := resp.Topics[:0]
		for _, t := range resp.Topics {
			if emptied || all && t.Topic != nil && !p.Topic(acl.Describe, *t.Topic) {
				continue
			}
			if t.Topic != nil && !p.Topic(acl.Describe, *t.Topic) {
				// Asked by topic id (v12), which the handler resolved: Kafka answers
				// TOPIC_AUTHORIZATION_FAILED with the id and no name ("topic IDs are not
				// considered sensitive").
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID, mt.ErrorCode = t.TopicID, wire.ErrTopicAuthorizationFailed
				mt.AuthorizedOperations = authorizedOperationsOmitted
				t = mt
			}
			out = append(out, t)
		}
		for _, name := range denied {
			mt := kmsg.NewMetadataResponseTopic()
			n := name
			mt.Topic, mt.ErrorCode = &n, wire.ErrTopicAuthorizationFailed
			mt.AuthorizedOperations = authorizedOperationsOmitted
			out = append(out, mt)
		}
		resp.Topics = out
	}
}
