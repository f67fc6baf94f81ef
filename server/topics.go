package server

import (
	"errors"

	"inlet/batchlog"
	"inlet/server/admin"
	"inlet/topicconfig"
	"inlet/wire"
)

// topicFor finds a topic, creating it when auto-creation is on and create is set; created
// tells that this call made it. The lookup by []byte does not allocate (the compiler elides
// the string conversion in a map index). A creation counts against max.partitions
// (POLICY_VIOLATION past it) and r's client's controller_mutation_rate (strict: refused
// THROTTLING_QUOTA_EXCEEDED while over it; admin/limits.go).
func (s *Server) topicFor(r *request, name []byte, create bool) (t *batchlog.Topic, code int16, created bool) {
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
	if code, _, _ := admin.MutationRefused(r.c, r.hdr.ClientID); code != 0 {
		return nil, code, false
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	bounds := admin.PartitionBounds{Node: s.cfg.MaxPartitions, PerPrincipal: s.cfg.MaxPartitionsPerPrincipal}
	if code, msg := admin.CheckPartitionBound(s.blog, bounds, r.c.User(), s.cfg.DefaultPartitions); code != 0 {
		if t, ok := s.blog.Topic(string(name)); ok {
			return t, 0, false // made meanwhile by another request
		}
		s.log.Debug("auto-create refused", "topic", string(name), "reason", msg)
		return nil, code, false
	}
	configs := topicconfig.WithDisklessDefault(nil, s.cfg.DisklessDefault)
	t, err := s.blog.CreateTopicBy(string(name), s.cfg.DefaultPartitions, configs, r.c.User())
	if err == nil && t.Settings.Diskless {
		if code, _ := s.admin.DescribeCreated(t); code != 0 {
			return nil, code, false
		}
	}
	if err != nil && !errors.Is(err, batchlog.ErrTopicExists) {
		s.log.Error("auto-create topic failed", "topic", string(name), "err", err)
		return nil, wire.ErrUnknownServerError, false
	}
	if err == nil {
		s.log.Info("created topic", "topic", t.Name, "partitions", len(t.Partitions))
		s.groups.TopicsChanged() // consumer groups' regular expressions may match it
		admin.RecordMutations(r.c, r.hdr.ClientID, len(t.Partitions))
	}
	return t, 0, err == nil
}
