package server

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/groups"
	"inlet/server/authz"
	"inlet/wire"
)

// ConsumerGroupHeartbeat v0-v1 (KIP-848, the versions Kafka 4 serves; v1: the member id is
// the client's, and SubscribedTopicRegex). Package groups has the state machine
// (consumer_group.go); the coordinator computes the assignment with its uniform or range
// assignor. Off unless group.coordinator.rebalance.protocols lists "consumer": then, as
// Kafka, the API is still advertised and answers UNSUPPORTED_VERSION, which sends clients
// back to the classic protocol.
const consumerGroupHeartbeatKey = 68

func init() {
	register(api{key: consumerGroupHeartbeatKey, min: 0, max: 1, handle: handleConsumerGroupHeartbeat,
		authz: before(authorizeConsumerGroupHeartbeat, onGroups(acl.Read), onTopics(acl.Describe))})
}

func handleConsumerGroupHeartbeat(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	clientID, host := clientIDHost(r)
	h := groups.ConsumerHeartbeat{ClientID: clientID, ClientHost: host, Principal: r.c.User()}
	if sub := s.subjectOf(r); sub.Restricted() {
		// The topics a regular expression matches are those the principal may describe.
		h.Allowed = func(topic string) bool { return sub.Topic(acl.Describe, topic) }
	}
	existed, ok := s.admitGroup(r, req.Group, req.MemberEpoch == 0) // group_bounds.go
	if !ok {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		msg := "The principal holds max.groups.per.principal groups; no more can be created."
		resp.ErrorCode, resp.ErrorMessage = errGroupBound, &msg
		return resp, nil
	}
	resp := s.groups.ConsumerHeartbeat(req, h)
	s.ownGroup(r, req.Group, existed)
	return resp, nil
}

// authorizeConsumerGroupHeartbeat: READ on the group, then DESCRIBE on every subscribed topic
// named (KafkaApis.handleConsumerGroupHeartbeat: TOPIC_AUTHORIZATION_FAILED if any is not).
func authorizeConsumerGroupHeartbeat(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !p.Group(acl.Read, req.Group) {
		resp.ErrorCode = wire.ErrGroupAuthorizationFailed
		return resp, nil
	}
	for _, t := range req.SubscribedTopicNames {
		if !p.Topic(acl.Describe, t) {
			resp.ErrorCode = wire.ErrTopicAuthorizationFailed
			return resp, nil
		}
	}
	return nil, nil
}

// consumerProtocolOn is whether group.coordinator.rebalance.protocols lists "consumer" (nil:
// Kafka 4's default, classic,consumer).
func consumerProtocolOn(rebalanceProtocols []string) bool {
	return rebalanceProtocols == nil || slices.Contains(rebalanceProtocols, "consumer")
}

// consumerGroupConfig is the KIP-848 groups' settings: the configured ones, on if
// group.coordinator.rebalance.protocols lists "consumer", and the topics from the log.
func (s *Server) consumerGroupConfig() groups.ConsumerConfig {
	cc := s.cfg.ConsumerGroups
	cc.Enabled = consumerProtocolOn(s.cfg.RebalanceProtocols)
	meta := func(t *batchlog.Topic) groups.TopicMeta {
		return groups.TopicMeta{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))}
	}
	cc.Topic = func(name string) (groups.TopicMeta, bool) {
		t, ok := s.blog.Topic(name)
		if !ok {
			return groups.TopicMeta{}, false
		}
		return meta(t), true
	}
	cc.Topics = func() []groups.TopicMeta {
		ts := s.blog.Topics()
		out := make([]groups.TopicMeta, len(ts))
		for i, t := range ts {
			out[i] = meta(t)
		}
		return out
	}
	return cc
}

// ConsumerGroupSettings parses the KIP-848 flags: group.coordinator.rebalance.protocols
// (comma-separated; Kafka requires classic in it, and knows classic, consumer and share, the
// last not served here) and group.consumer.assignors (uniform and range), with the session
// timeout, heartbeat interval (ms, positive, the interval below the timeout) and max size.
func ConsumerGroupSettings(protocols, assignors string, sessionMs, heartbeatMs, maxSize int) ([]string, groups.ConsumerConfig, error) {
	var cc groups.ConsumerConfig
	list := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	ps := list(protocols)
	for _, p := range ps {
		if p != "classic" && p != "consumer" {
			return nil, cc, fmt.Errorf("--group-coordinator-rebalance-protocols: %q is not a rebalance protocol this node serves (classic, consumer)", p)
		}
	}
	if !slices.Contains(ps, "classic") {
		return nil, cc, fmt.Errorf("--group-coordinator-rebalance-protocols: classic must be listed, as Kafka requires")
	}
	cc.Assignors = list(assignors)
	if len(cc.Assignors) == 0 {
		return nil, cc, fmt.Errorf("--group-consumer-assignors: at least one assignor")
	}
	for _, a := range cc.Assignors {
		if a != groups.AssignorUniform && a != groups.AssignorRange {
			return nil, cc, fmt.Errorf("--group-consumer-assignors: %q is not an assignor this node has (uniform, range)", a)
		}
	}
	if sessionMs <= 0 || heartbeatMs <= 0 || heartbeatMs >= sessionMs {
		return nil, cc, fmt.Errorf("--group-consumer-heartbeat-interval-ms (%d) must be positive and below --group-consumer-session-timeout-ms (%d)", heartbeatMs, sessionMs)
	}
	if maxSize <= 0 {
		return nil, cc, fmt.Errorf("--group-consumer-max-size: at least 1")
	}
	cc.SessionTimeout = time.Duration(sessionMs) * time.Millisecond
	cc.HeartbeatInterval = time.Duration(heartbeatMs) * time.Millisecond
	cc.MaxSize = maxSize
	return ps, cc, nil
}

// ConsumerGroupBounds sets Inlet's bounds of KIP-848 groups (groups/consumer_bounds.go):
// members per principal over every group (0: no bound), subscribed names per member and
// distinct regular expressions per group (at least 1 each).
func ConsumerGroupBounds(cc *groups.ConsumerConfig, membersPerPrincipal, topicsPerMember, regexesPerGroup int) error {
	switch {
	case membersPerPrincipal < 0:
		return fmt.Errorf("--max-consumer-members-per-principal: 0 (no bound) or more")
	case topicsPerMember <= 0:
		return fmt.Errorf("--max-subscribed-topics-per-member: at least 1")
	case regexesPerGroup <= 0:
		return fmt.Errorf("--max-regexes-per-group: at least 1")
	}
	cc.MaxMembersPerPrincipal = membersPerPrincipal
	if membersPerPrincipal == 0 {
		cc.MaxMembersPerPrincipal = -1
	}
	cc.MaxSubscribedTopics, cc.MaxRegexes = topicsPerMember, regexesPerGroup
	return nil
}
