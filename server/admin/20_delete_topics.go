package admin

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// DeleteTopics v0-v6 (v5 error messages, v6 topics by name or id). Deleting removes the
// topic's record, batch index, high watermarks and producer states (batchlog.DeleteTopic) and
// every group's committed offsets for it; the name is free again at once. In the segment
// layout the record bytes stay in their shared segment files until retention reclaims files
// that no live partition references.
const deleteTopicsKey = 20

func init() {
	register(API{Key: deleteTopicsKey, Min: 0, Max: 6, Handle: handleDeleteTopics,
		Authz: before(authorizeDeleteTopics, onTopics(acl.Delete))})
}

func handleDeleteTopics(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: strp(n)})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	for _, tg := range targets {
		ot := kmsg.NewDeleteTopicsResponseTopic()
		ot.Topic, ot.TopicID = tg.name, tg.id
		name := ""
		if tg.name != nil {
			name = *tg.name
		} else {
			if n, ok := s.topicNameByID(tg.id); ok {
				name = n
				ot.Topic = strp(name)
			}
			if name == "" {
				ot.ErrorCode = wire.ErrUnknownTopicID
				resp.Topics = append(resp.Topics, ot)
				continue
			}
		}
		t, ok := s.blog.Topic(name)
		if !ok {
			ot.ErrorCode = wire.ErrUnknownTopicOrPartition
			if req.Version >= 5 {
				ot.ErrorMessage = strp("This server does not host this topic-partition.")
			}
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.TopicID = t.ID
		if t.Internal() {
			ot.ErrorCode = wire.ErrInvalidTopic
			if req.Version >= 5 {
				ot.ErrorMessage = strp("Cannot delete internal topic " + name + ".")
			}
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		fail := func(code int16, msg string) {
			ot.ErrorCode = code
			if req.Version >= 5 {
				ot.ErrorMessage = strp(msg)
			}
		}
		if req.Version >= 5 && s.mutationRefused(r, fail, &resp.ThrottleMillis) {
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		resp.ThrottleMillis = max(resp.ThrottleMillis, RecordMutations(r.Conn, r.ClientID, len(t.Partitions)))
		if err := s.blog.DeleteTopic(name); err != nil {
			s.log.Error("delete topic", "topic", name, "err", err)
			ot.ErrorCode = wire.ErrUnknownServerError
			if req.Version >= 5 {
				ot.ErrorMessage = strp(fmt.Sprint(err))
			}
		} else {
			s.groups.RemoveTopic(name)
			s.log.Info("deleted topic", "topic", name)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// authorizeDeleteTopics: DELETE on each topic, named or by id
// (KafkaApis.handleDeleteTopicsRequest).
func authorizeDeleteTopics(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	var denied []string
	req.TopicNames, denied = authz.SplitAllowed(req.TopicNames, func(n string) bool { return p.Topic(acl.Delete, n) })
	var deniedIDs [][16]byte
	kept := req.Topics[:0]
	for _, t := range req.Topics {
		name := t.Topic
		if name == nil {
			// v6 by id: resolved here; an unknown id is left to the handler
			// (UNKNOWN_TOPIC_ID), a known one of a topic the principal may not delete
			// is TOPIC_AUTHORIZATION_FAILED with the id and no name, as Kafka answers.
			if n, ok := s.topicNameByID(t.TopicID); ok {
				name = &n
			}
			if name != nil && !p.Topic(acl.Delete, *name) {
				deniedIDs = append(deniedIDs, t.TopicID)
				continue
			}
		} else if !p.Topic(acl.Delete, *name) {
			denied = append(denied, *name)
			continue
		}
		kept = append(kept, t)
	}
	req.Topics = kept
	if len(denied) == 0 && len(deniedIDs) == 0 {
		return nil, nil
	}
	return nil, func(kresp kmsg.Response) {
		resp := kresp.(*kmsg.DeleteTopicsResponse)
		for _, name := range denied {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			n := name
			rt.Topic, rt.ErrorCode = &n, wire.ErrTopicAuthorizationFailed
			resp.Topics = append(resp.Topics, rt)
		}
		for _, id := range deniedIDs {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.TopicID, rt.ErrorCode = id, wire.ErrTopicAuthorizationFailed
			resp.Topics = append(resp.Topics, rt)
		}
	}
}

// topicNameByID returns the name of the topic whose id is id (DeleteTopics v6 names topics
// by id only).
func (s *Server) topicNameByID(id [16]byte) (string, bool) {
	for _, t := range s.blog.Topics() {
		if t.ID == id {
			return t.Name, true
		}
	}
	return "", false
}
