package server

import (
	"errors"

	"inlet/batchlog"
	"inlet/server/admin"
	"inlet/wire"
)

// topicFor finds a topic, creating it when auto-creation is on and create is set; created
// tells that this call made it. The lookup by []byte does not allocate (the compiler elides
// the string conversion in a map index).
func (s *Server) topicFor(name []byte, create bool) (t *batchlog.Topic, code int16, created bool) {
	if t, ok := s.blog.Topic(string(name)); ok {
		return t, 0, false
	}
	if !create || !s.cfg.AutoCreateTopics {
		return nil, wire.ErrUnknownTopicOrPartition, false
	}
	if string(name) == batchlog.OffsetsTopic {
		// Created as Kafka creates it (50 partitions, compacted), never as a plain topic.
		t, err := s.blog.EnsureOffsetsTopic()
		if err != nil {
			s.log.Error("create the offsets topic", "err", err)
			return nil, wire.ErrUnknownServerError, false
		}
		return t, 0, false
	}
	if !admin.ValidTopicName(name) {
		return nil, wire.ErrInvalidTopic, false
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	t, err := s.blog.CreateTopic(string(name), s.cfg.DefaultPartitions, nil)
	if err != nil && !errors.Is(err, batchlog.ErrTopicExists) {
		s.log.Error("auto-create topic failed", "topic", string(name), "err", err)
		return nil, wire.ErrUnknownServerError, false
	}
	if err == nil {
		s.log.Info("created topic", "topic", t.Name, "partitions", len(t.Partitions))
	}
	return t, 0, err == nil
}
