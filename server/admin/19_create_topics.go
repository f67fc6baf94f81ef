package admin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/server/authz"
	"inlet/topicconfig"
	"inlet/wire"
)

// CreateTopics v0-v7 (v1 validate-only and error messages, v5 the created topic's configs,
// partitions and replication factor in the response, v7 its topic id). One broker: a
// replication factor of -1 (the default, KIP-464) or 1 is accepted, any other is
// INVALID_REPLICATION_FACTOR, as a one-broker Kafka answers; manual replica assignments may
// only name this node. Topic names follow Kafka's rules, including the '.'/'_' collision
// rule (Topic.hasCollision): "a.b" and "a_b" cannot both exist, because metric names
// replace '.' with '_'.
const createTopicsKey = 19

func init() {
	register(API{Key: createTopicsKey, Min: 0, Max: 7, Handle: handleCreateTopics,
		Authz: before(authorizeCreateTopics, onCluster(acl.Create), onTopics(acl.Create))})
}

func handleCreateTopics(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	for _, rt := range req.Topics {
		ot := kmsg.NewCreateTopicsResponseTopic()
		ot.Topic = rt.Topic
		ot.NumPartitions, ot.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			ot.ErrorCode = code
			if req.Version >= 1 {
				ot.ErrorMessage = &msg
			}
		}
		if seen[rt.Topic] > 1 {
			fail(wire.ErrInvalidRequest, fmt.Sprintf("Create topics request from client contains multiple entries for the same topic %s", rt.Topic))
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		if req.Version >= 6 && s.mutationRefused(r, fail, &resp.ThrottleMillis) {
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		t, code, msg := s.createTopic(rt, req.ValidateOnly, principalOf(r))
		if code == 0 && !req.ValidateOnly {
			resp.ThrottleMillis = max(resp.ThrottleMillis, RecordMutations(r.Conn, r.ClientID, len(t.Partitions)))
		}
		if code != 0 {
			fail(code, msg)
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.NumPartitions, ot.ReplicationFactor = int32(len(t.Partitions)), 1
		ot.TopicID = t.ID
		if req.Version >= 5 {
			for _, e := range s.topicConfigs(s.brokerLevels(), t.Configs) {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.Value, c.Source, c.ReadOnly = e.name, e.value, e.source, e.readOnly
				ot.Configs = append(ot.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// maxPartitionsPerTopic bounds what one request can make a topic hold (KRaft's controller
// refuses more than 10,000 partition records in one operation), so that a client cannot make
// the node allocate a partition's state two billion times.
const (
	maxPartitionsPerTopic = 10000
	tooManyPartitions     = "Excessively large number of partitions per request: at most 10000 per topic."
)

// createTopic validates and (unless validateOnly) creates one topic. Callers hold createMu.
// With validateOnly the returned topic is a description of what would be created.
func (s *Server) createTopic(rt kmsg.CreateTopicsRequestTopic, validateOnly bool, creator string) (*batchlog.Topic, int16, string) {
	name := rt.Topic
	if code, msg := s.checkNewTopicName(name); code != 0 {
		return nil, code, msg
	}
	partitions := int(rt.NumPartitions)
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return nil, wire.ErrInvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
		}
		// As Kafka's ReplicationControlManager.createTopic: the partition ids must be the set
		// 0..n-1, in any order (sarama sends its assignment from a map).
		seen := make([]bool, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(seen) || seen[a.Partition] {
				return nil, wire.ErrInvalidReplicaAssignment, "Partitions should be a consecutive 0-based integer sequence"
			}
			seen[a.Partition] = true
			if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
				return nil, wire.ErrInvalidReplicaAssignment, fmt.Sprintf("Replica assignment for partition %d must name only broker %d, the one broker of this cluster", a.Partition, s.cfg.NodeID)
			}
		}
		partitions = len(rt.ReplicaAssignment)
	} else {
		switch {
		case rt.NumPartitions == -1:
			partitions = s.cfg.DefaultPartitions
		case rt.NumPartitions <= 0:
			return nil, wire.ErrInvalidPartitions, "Number of partitions must be larger than 0."
		}
		switch {
		case rt.ReplicationFactor == -1 || rt.ReplicationFactor == 1:
		case rt.ReplicationFactor <= 0:
			return nil, wire.ErrInvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value."
		default:
			return nil, wire.ErrInvalidReplicationFactor, fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered.", rt.ReplicationFactor, rt.ReplicationFactor)
		}
	}
	if partitions > maxPartitionsPerTopic {
		return nil, wire.ErrInvalidPartitions, tooManyPartitions
	}
	if code, msg := CheckPartitionBound(s.blog, s.partitionBounds(), creator, partitions); code != 0 {
		return nil, code, msg
	}
	var configs map[string]string
	for _, c := range rt.Configs {
		if c.Value == nil {
			return nil, wire.ErrInvalidConfig, fmt.Sprintf("Null value not supported for topic configs: %s", c.Name)
		}
		if configs == nil {
			configs = map[string]string{}
		}
		configs[c.Name] = *c.Value
	}
	if err := topicconfig.ValidateAll(configs); err != nil {
		return nil, wire.ErrInvalidConfig, err.Error()
	}
	configs = topicconfig.WithDisklessDefault(configs, s.cfg.DisklessDefault)
	if err := topicconfig.CheckCombination(configs, s.remote); err != nil {
		return nil, wire.ErrInvalidConfig, err.Error()
	}
	if validateOnly {
		t := &batchlog.Topic{Name: name, Configs: configs}
		t.Partitions = make([]*batchlog.Partition, partitions)
		return t, 0, ""
	}
	t, err := s.blog.CreateTopicBy(name, partitions, configs, creator)
	if errors.Is(err, batchlog.ErrTopicExists) {
		return nil, wire.ErrTopicAlreadyExists, fmt.Sprintf("Topic '%s' already exists.", name)
	}
	if err != nil {
		s.log.Error("create topic", "topic", name, "err", err)
		return nil, wire.ErrUnknownServerError, err.Error()
	}
	if code, msg := s.DescribeCreated(t); code != 0 {
		return nil, code, msg // not in the bucket, so not created
	}
	s.log.Info("created topic", "topic", name, "partitions", partitions)
	s.groups.TopicsChanged() // consumer groups' regular expressions may match it
	return t, 0, ""
}

// checkNewTopicName applies Topic.validate and the existence and collision checks.
func (s *Server) checkNewTopicName(name string) (int16, string) {
	switch {
	case name == "":
		return wire.ErrInvalidTopic, "Topic name is illegal, it can't be empty"
	case name == "." || name == "..":
		return wire.ErrInvalidTopic, "Topic name cannot be \".\" or \"..\""
	case len(name) > maxTopicNameLength:
		return wire.ErrInvalidTopic, fmt.Sprintf("Topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicNameLength, name)
	case !ValidTopicName([]byte(name)):
		return wire.ErrInvalidTopic, fmt.Sprintf("Topic name \"%s\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
	}
	if _, ok := s.blog.Topic(name); ok {
		return wire.ErrTopicAlreadyExists, fmt.Sprintf("Topic '%s' already exists.", name)
	}
	if strings.ContainsAny(name, "._") {
		unified := strings.ReplaceAll(name, ".", "_")
		for _, t := range s.blog.Topics() {
			if strings.ReplaceAll(t.Name, ".", "_") == unified {
				return wire.ErrInvalidTopic, fmt.Sprintf("Topic '%s' collides with existing topic: %s", name, t.Name)
			}
		}
	}
	return 0, ""
}

// maxTopicNameLength is Topic.MAX_NAME_LENGTH: 249, so that a partition directory name
// (topic-partition) stays within common filesystem limits.
const maxTopicNameLength = 249

// ValidTopicName follows org.apache.kafka.common.internals.Topic.validate: 1..249 characters
// of [a-zA-Z0-9._-], and not "." or "..".
func ValidTopicName(name []byte) bool {
	if len(name) == 0 || len(name) > maxTopicNameLength {
		return false
	}
	if string(name) == "." || string(name) == ".." {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// authorizeCreateTopics: CREATE on the cluster, else on each topic
// (KafkaApis.handleCreateTopicsRequest).
func authorizeCreateTopics(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	mayCreate := p.Cluster(acl.Create) // KafkaApis: CREATE on the cluster, else on each topic
	var denied []kmsg.CreateTopicsRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
		return mayCreate || p.Topic(acl.Create, t.Topic)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.CreateTopicsResponse)
		for _, t := range denied {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, wire.ErrTopicAuthorizationFailed
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			if req.Version >= 1 {
				msg := "Authorization failed."
				rt.ErrorMessage = &msg
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
}
