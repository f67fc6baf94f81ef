package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// Authorization by topic prefix (and group and transactional-id prefix), for connections
// whose principal is restricted. It runs before the handler: topics the principal may not use
// are taken out of the request, so the handler neither sees nor auto-creates them, and the
// returned deny function adds them back to the response with TOPIC_AUTHORIZATION_FAILED
// (Kafka's AclAuthorizer answers per topic the same way). Requests about a single group or
// transactional id that is out of scope are answered at once (the first result), without
// calling the handler. Produce is checked in 00_produce.go (its path is hand-written).
//
// Metadata lists only the principal's topics when asked for all of them (KafkaApis filters
// by DESCRIBE permission), and answers TOPIC_AUTHORIZATION_FAILED for named topics outside
// its prefixes without creating them.
//
// The rule every case keeps: an answer about a name outside the prefixes never depends on
// whether it exists (Kafka checks authorization before the metadata cache), so the entry is
// taken out before the handler can look it up. The group and transaction APIs that also name
// topics (OffsetCommit, OffsetFetch, OffsetDelete here; TxnOffsetCommit and
// AddPartitionsToTxn in their files) check each topic as well as the group or id.
// TestTenantLearnsNothingOutsideItsPrefix (e2e) asks every served API about another
// tenant's resources and about names that exist nowhere and compares the answers.

func (s *Server) authorize(p subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	switch req := kreq.(type) {
	case *kmsg.MetadataRequest:
		all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
		var denied []string
		kept := req.Topics[:0]
		// KafkaApis.getTopicMetadata: a topic that would be auto-created needs CREATE (on the
		// cluster or the topic); without it the answer is TOPIC_AUTHORIZATION_FAILED. Only
		// topics the principal may describe are looked up.
		autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation) && !p.cluster(acl.Create)
		for _, t := range req.Topics {
			if t.Topic != nil && !p.topic(acl.Describe, *t.Topic) {
				denied = append(denied, *t.Topic)
				continue
			}
			if t.Topic != nil && autoCreate && !p.topic(acl.Create, *t.Topic) {
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
				if emptied || all && t.Topic != nil && !p.topic(acl.Describe, *t.Topic) {
					continue
				}
				if t.Topic != nil && !p.topic(acl.Describe, *t.Topic) {
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

	case *kmsg.FetchRequest:
		var denied []kmsg.FetchRequestTopic
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.FetchRequestTopic) bool { return p.topic(acl.Read, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp, ok := kresp.(*kmsg.FetchResponse) // a throttled fetch's empty answer
			if !ok {
				resp = kresp.(*fetchReply).FetchResponse
			}
			for _, t := range denied {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
					rp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null set
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}

	case *kmsg.ListOffsetsRequest:
		var denied []kmsg.ListOffsetsRequestTopic
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.ListOffsetsRequestTopic) bool { return p.topic(acl.Describe, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.ListOffsetsResponse)
			for _, t := range denied {
				rt := kmsg.NewListOffsetsResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewListOffsetsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
					rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}

	case *kmsg.CreateTopicsRequest:
		var denied []string
		kept := req.Topics[:0]
		mayCreate := p.cluster(acl.Create) // KafkaApis: CREATE on the cluster, else on each topic
		for _, t := range req.Topics {
			if !mayCreate && !p.topic(acl.Create, t.Topic) {
				denied = append(denied, t.Topic)
				continue
			}
			kept = append(kept, t)
		}
		req.Topics = kept
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.CreateTopicsResponse)
			for _, name := range denied {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = name, wire.ErrTopicAuthorizationFailed
				rt.NumPartitions, rt.ReplicationFactor = -1, -1
				if req.Version >= 1 {
					msg := "Authorization failed."
					rt.ErrorMessage = &msg
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}

	case *kmsg.DeleteTopicsRequest:
		var denied []string
		keptNames := req.TopicNames[:0]
		for _, n := range req.TopicNames {
			if !p.topic(acl.Delete, n) {
				denied = append(denied, n)
				continue
			}
			keptNames = append(keptNames, n)
		}
		req.TopicNames = keptNames
		var deniedIDs [][16]byte
		kept := req.Topics[:0]
		for _, t := range req.Topics {
			name := t.Topic
			if name == nil {
				// v6 by id: resolved here; an unknown id is left to the handler
				// (UNKNOWN_TOPIC_ID), a known one of a topic the principal may not delete
				// is TOPIC_AUTHORIZATION_FAILED with the id and no name, as Kafka answers.
				for _, tp := range s.blog.Topics() {
					if tp.ID == t.TopicID {
						name = &tp.Name
						break
					}
				}
				if name != nil && !p.topic(acl.Delete, *name) {
					deniedIDs = append(deniedIDs, t.TopicID)
					continue
				}
			} else if !p.topic(acl.Delete, *name) {
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

	case *kmsg.CreatePartitionsRequest:
		var denied []string
		kept := req.Topics[:0]
		for _, t := range req.Topics {
			if !p.topic(acl.Alter, t.Topic) {
				denied = append(denied, t.Topic)
				continue
			}
			kept = append(kept, t)
		}
		req.Topics = kept
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.CreatePartitionsResponse)
			for _, name := range denied {
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic, rt.ErrorCode = name, wire.ErrTopicAuthorizationFailed
				resp.Topics = append(resp.Topics, rt)
			}
		}

	case *kmsg.DeleteRecordsRequest:
		var denied []kmsg.DeleteRecordsRequestTopic
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.DeleteRecordsRequestTopic) bool { return p.topic(acl.Delete, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.DeleteRecordsResponse)
			for _, t := range denied {
				rt := kmsg.NewDeleteRecordsResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewDeleteRecordsResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.LowWatermark = pt.Partition, wire.ErrTopicAuthorizationFailed, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}

	case *kmsg.OffsetForLeaderEpochRequest:
		var denied []kmsg.OffsetForLeaderEpochRequestTopic
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) bool { return p.topic(acl.Describe, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
			for _, t := range denied {
				rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
					rp.LeaderEpoch, rp.EndOffset = -1, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}

	case *kmsg.DescribeConfigsRequest:
		var denied []kmsg.DescribeConfigsRequestResource
		req.Resources, denied = splitAllowed(req.Resources, func(rs kmsg.DescribeConfigsRequestResource) bool {
			return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.topic(acl.DescribeConfigs, rs.ResourceName)
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

	case *kmsg.AlterConfigsRequest:
		var denied []kmsg.AlterConfigsRequestResource
		req.Resources, denied = splitAllowed(req.Resources, func(rs kmsg.AlterConfigsRequestResource) bool {
			return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.topic(acl.AlterConfigs, rs.ResourceName)
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

	case *kmsg.IncrementalAlterConfigsRequest:
		var denied []kmsg.IncrementalAlterConfigsRequestResource
		req.Resources, denied = splitAllowed(req.Resources, func(rs kmsg.IncrementalAlterConfigsRequestResource) bool {
			return rs.ResourceType != kmsg.ConfigResourceTypeTopic || p.topic(acl.AlterConfigs, rs.ResourceName)
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

	case *kmsg.InitProducerIDRequest:
		// KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id; without one
		// (an idempotent producer), IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
		code := int16(0)
		switch {
		case req.TransactionalID != nil:
			if !p.txnID(acl.Write, *req.TransactionalID) {
				code = wire.ErrTransactionalIDAuthorizationFailed
			}
		case !p.cluster(acl.IdempotentWrite) && !p.anyTopic(acl.Write):
			code = wire.ErrClusterAuthorizationFailed
		}
		if code != 0 {
			resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
			return resp, nil
		}

	case *kmsg.JoinGroupRequest:
		if !p.group(acl.Read, req.Group) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = wire.ErrGroupAuthorizationFailed, -1
			return resp, nil
		}
	case *kmsg.SyncGroupRequest:
		if !p.group(acl.Read, req.Group) {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = wire.ErrGroupAuthorizationFailed
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if !p.group(acl.Read, req.Group) {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = wire.ErrGroupAuthorizationFailed
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if !p.group(acl.Read, req.Group) {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = wire.ErrGroupAuthorizationFailed
			return resp, nil
		}
	case *kmsg.OffsetCommitRequest:
		// KafkaApis.handleOffsetCommitRequest: READ on the group, then READ on each topic;
		// a topic it may not read is TOPIC_AUTHORIZATION_FAILED per partition, checked before
		// the topic is looked up (so whether it exists, and its partition count, stay
		// hidden) and never reaches the coordinator (nothing is stored for it).
		if !p.group(acl.Read, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrGroupAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		var denied []kmsg.OffsetCommitRequestTopic
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return p.topic(acl.Read, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		add := func(resp *kmsg.OffsetCommitResponse) {
			for _, t := range denied {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		if len(req.Topics) == 0 {
			// As Kafka: nothing authorized is left, so the coordinator is not asked.
			resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
			add(resp)
			return resp, nil
		}
		return nil, func(kresp kmsg.Response) { add(kresp.(*kmsg.OffsetCommitResponse)) }

	case *kmsg.OffsetFetchRequest:
		// KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group; named topics it may not
		// describe are TOPIC_AUTHORIZATION_FAILED per partition (offset -1) without being
		// looked up; asked for every topic (null topics), only topics it may describe are
		// returned. v8 does the same per group.
		if req.Version < 8 {
			if !p.group(acl.Describe, req.Group) {
				resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
				resp.ErrorCode = wire.ErrGroupAuthorizationFailed
				return resp, nil
			}
			var denied []kmsg.OffsetFetchRequestTopic
			req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.OffsetFetchRequestTopic) bool { return p.topic(acl.Describe, t.Topic) })
			return nil, func(kresp kmsg.Response) {
				resp := kresp.(*kmsg.OffsetFetchResponse)
				resp.Topics, _ = splitAllowed(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return p.topic(acl.Describe, t.Topic) })
				for _, t := range denied {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = t.Topic
					for _, i := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseTopicPartition()
						md := ""
						rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = i, -1, -1, &md, wire.ErrTopicAuthorizationFailed
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
			}
		}
		var deniedGroups []kmsg.OffsetFetchRequestGroup
		req.Groups, deniedGroups = splitAllowed(req.Groups, func(g kmsg.OffsetFetchRequestGroup) bool { return p.group(acl.Describe, g.Group) })
		deniedTopics := make([][]kmsg.OffsetFetchRequestGroupTopic, len(req.Groups)) // by the kept group's index
		for i := range req.Groups {
			req.Groups[i].Topics, deniedTopics[i] = splitAllowed(req.Groups[i].Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool { return p.topic(acl.Describe, t.Topic) })
		}
		kept := len(req.Groups)
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.OffsetFetchResponse)
			// The handler answers one group per request group, in order.
			for i := 0; i < kept && i < len(resp.Groups); i++ {
				rg := &resp.Groups[i]
				rg.Topics, _ = splitAllowed(rg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return p.topic(acl.Describe, t.Topic) })
				for _, t := range deniedTopics[i] {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = t.Topic
					for _, pi := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						md := ""
						rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = pi, -1, -1, &md, wire.ErrTopicAuthorizationFailed
						rt.Partitions = append(rt.Partitions, rp)
					}
					rg.Topics = append(rg.Topics, rt)
				}
			}
			for _, g := range deniedGroups {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, wire.ErrGroupAuthorizationFailed
				resp.Groups = append(resp.Groups, rg)
			}
		}

	case *kmsg.OffsetDeleteRequest:
		// KafkaApis.handleOffsetDeleteRequest: DELETE on the group (a group error is the
		// top-level error), READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition,
		// never looked up, never deleted).
		if !p.group(acl.Delete, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = wire.ErrGroupAuthorizationFailed
			return resp, nil
		}
		var denied []kmsg.OffsetDeleteRequestTopic
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return p.topic(acl.Read, t.Topic) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.OffsetDeleteResponse)
			if resp.ErrorCode != wire.ErrNone {
				return // Kafka answers a group error alone
			}
			for _, t := range denied {
				rt := kmsg.NewOffsetDeleteResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewOffsetDeleteResponseTopicPartition()
					rp.Partition, rp.ErrorCode = pt.Partition, wire.ErrTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
	case *kmsg.DescribeGroupsRequest:
		var denied []string
		req.Groups, denied = splitAllowed(req.Groups, func(g string) bool { return p.group(acl.Describe, g) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.DescribeGroupsResponse)
			for _, g := range denied {
				rg := kmsg.NewDescribeGroupsResponseGroup()
				rg.Group, rg.ErrorCode, rg.AuthorizedOperations = g, wire.ErrGroupAuthorizationFailed, authorizedOperationsOmitted
				resp.Groups = append(resp.Groups, rg)
			}
		}
	case *kmsg.DeleteGroupsRequest:
		// Groups outside the principal's prefixes are taken out of the request before the
		// handler runs, so they are never deleted, and answered GROUP_AUTHORIZATION_FAILED.
		var denied []string
		req.Groups, denied = splitAllowed(req.Groups, func(g string) bool { return p.group(acl.Delete, g) })
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.DeleteGroupsResponse)
			for _, g := range denied {
				rg := kmsg.NewDeleteGroupsResponseGroup()
				rg.Group, rg.ErrorCode = g, wire.ErrGroupAuthorizationFailed
				resp.Groups = append(resp.Groups, rg)
			}
		}
	case *kmsg.ListGroupsRequest:
		// KafkaApis.handleListGroupsRequest: every group with DESCRIBE on the cluster, else
		// those the principal may describe.
		if p.cluster(acl.Describe) {
			return nil, nil
		}
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.ListGroupsResponse)
			out := resp.Groups[:0]
			for _, g := range resp.Groups {
				if p.group(acl.Describe, g.Group) {
					out = append(out, g)
				}
			}
			resp.Groups = out
		}

	case *kmsg.DescribeProducersRequest:
		var denied []kmsg.DescribeProducersRequestTopic
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.DescribeProducersRequestTopic) bool { return p.topic(acl.Read, t.Topic) })
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.DescribeProducersResponse)
			for _, t := range denied {
				ot := kmsg.NewDescribeProducersResponseTopic()
				ot.Topic = t.Topic
				for _, i := range t.Partitions {
					op := kmsg.NewDescribeProducersResponseTopicPartition()
					op.Partition, op.ErrorCode = i, wire.ErrTopicAuthorizationFailed
					ot.Partitions = append(ot.Partitions, op)
				}
				resp.Topics = append(resp.Topics, ot)
			}
		}

	case *kmsg.DescribeLogDirsRequest:
		// Kafka needs DESCRIBE on the cluster; here a principal sees its own topics' sizes,
		// and not the volume's total and usable bytes (KIP-827's -1, unknown): how they
		// move tells how much the other tenants write.
		if req.Topics != nil {
			req.Topics, _ = splitAllowed(req.Topics, func(t kmsg.DescribeLogDirsRequestTopic) bool { return p.topic(acl.Describe, t.Topic) })
		}
		cluster := p.cluster(acl.Describe)
		return nil, func(kresp kmsg.Response) {
			resp := kresp.(*kmsg.DescribeLogDirsResponse)
			for i := range resp.Dirs {
				resp.Dirs[i].Topics, _ = splitAllowed(resp.Dirs[i].Topics, func(t kmsg.DescribeLogDirsResponseDirTopic) bool { return p.topic(acl.Describe, t.Topic) })
				if !cluster {
					resp.Dirs[i].TotalBytes, resp.Dirs[i].UsableBytes = -1, -1
				}
			}
		}

	// Elections and reassignments act on the cluster (Kafka: ALTER or DESCRIBE on CLUSTER):
	// only a principal allowed every topic may use them.
	case *kmsg.ElectLeadersRequest:
		if !p.cluster(acl.Alter) {
			resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
			resp.ErrorCode = wire.ErrClusterAuthorizationFailed
			for _, rt := range req.Topics {
				ot := kmsg.NewElectLeadersResponseTopic()
				ot.Topic = rt.Topic
				for _, i := range rt.Partitions {
					op := kmsg.NewElectLeadersResponseTopicPartition()
					op.Partition, op.ErrorCode = i, wire.ErrClusterAuthorizationFailed
					ot.Partitions = append(ot.Partitions, op)
				}
				resp.Topics = append(resp.Topics, ot)
			}
			return resp, nil
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		if !p.cluster(acl.Alter) {
			resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
			resp.ErrorCode = wire.ErrClusterAuthorizationFailed
			return resp, nil
		}
	case *kmsg.ListPartitionReassignmentsRequest:
		if !p.cluster(acl.Describe) {
			resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
			resp.ErrorCode = wire.ErrClusterAuthorizationFailed
			return resp, nil
		}
	case *kmsg.UpdateFeaturesRequest:
		if !p.cluster(acl.Alter) {
			resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
			resp.ErrorCode = wire.ErrClusterAuthorizationFailed
			for _, u := range req.FeatureUpdates {
				res := kmsg.NewUpdateFeaturesResponseResult()
				res.Feature, res.ErrorCode = u.Feature, wire.ErrClusterAuthorizationFailed
				resp.Results = append(resp.Results, res)
			}
			return resp, nil
		}
	}
	return nil, nil
}

// splitAllowed separates the entries of a request that pass allowed from the others, keeping
// order. kept reuses xs's backing array (each entry is read before its slot is rewritten);
// denied is a new slice, so both stay valid.
func splitAllowed[T any](xs []T, allowed func(T) bool) (kept, denied []T) {
	kept = xs[:0]
	for _, x := range xs {
		if allowed(x) {
			kept = append(kept, x)
		} else {
			denied = append(denied, x)
		}
	}
	return kept, denied
}
