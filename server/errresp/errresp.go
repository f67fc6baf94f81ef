// Package errresp answers a Kafka request with one error code: For builds the response a
// request gets when the whole of it is refused for one reason (a node that does not lead
// the partitions, coordinate the groups or control the cluster), the code in every error
// field the response has, as Kafka's AbstractRequest.getErrorResponse does for each request.
// Every entry the request names (topic, partition, group, transactional id, resource, user)
// gets its own entry in the answer, so that a client that matches the answer to its request
// finds each; the fields Kafka sets beside an error (offsets, epochs, ids) take the values it
// gives them (-1). The response's version is the request's (kmsg's ResponseKind), and fields
// a version lacks are simply not encoded.
//
// Pure: no I/O, nothing shared; the response aliases the request's strings.
package errresp

import "github.com/twmb/franz-go/pkg/kmsg"

// For is req's response with code in every error field, or nil for a request it does not
// cover: ApiVersions, Metadata and the SASL requests, which a node answers with what it
// knows rather than an error, and keys no node serves.
func For(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return produce(r, code)
	case *kmsg.FetchRequest:
		return fetch(r, code)
	case *kmsg.ListOffsetsRequest:
		return listOffsets(r, code)
	case *kmsg.OffsetForLeaderEpochRequest:
		return offsetForLeaderEpoch(r, code)
	case *kmsg.OffsetCommitRequest:
		return offsetCommit(r, code)
	case *kmsg.OffsetFetchRequest:
		return offsetFetch(r, code)
	case *kmsg.FindCoordinatorRequest:
		return findCoordinator(r, code)
	case *kmsg.TxnOffsetCommitRequest:
		return txnOffsetCommit(r, code)
	case *kmsg.AddPartitionsToTxnRequest:
		return addPartitionsToTxn(r, code)
	case *kmsg.OffsetDeleteRequest:
		return offsetDelete(r, code)
	case *kmsg.DeleteRecordsRequest:
		return deleteRecords(r, code)
	case *kmsg.DescribeProducersRequest:
		return describeProducers(r, code)
	case *kmsg.ElectLeadersRequest:
		return electLeaders(r, code)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return alterPartitionAssignments(r, code)
	}
	return single(req, code)
}

// single answers the requests whose error fields are one top-level code or one per group,
// id or resource.
func single(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = code, -1
		if r.Version < 7 {
			resp.Protocol = kmsg.StringPtr("") // not nullable before v7
		}
		return resp
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		for _, m := range r.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, code
			resp.Members = append(resp.Members, rm)
		}
		return resp
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode, resp.MemberAssignment = code, []byte{}
		return resp
	case *kmsg.DescribeGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range r.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.ListGroupsRequest:
		resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DeleteGroupsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range r.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.ConsumerGroupHeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.ConsumerGroupDescribeRequest:
		resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range r.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	case *kmsg.AddOffsetsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.EndTxnRequest:
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	case *kmsg.DescribeTransactionsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range r.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, code
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	case *kmsg.ListTransactionsRequest:
		resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeClusterRequest:
		resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
		resp.ErrorCode, resp.ControllerID = code, -1
		return resp
	case *kmsg.ListPartitionReassignmentsRequest:
		resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.UpdateFeaturesRequest:
		resp := r.ResponseKind().(*kmsg.UpdateFeaturesResponse)
		resp.ErrorCode = code
		for _, u := range r.FeatureUpdates {
			rr := kmsg.NewUpdateFeaturesResponseResult()
			rr.Feature, rr.ErrorCode = u.Feature, code
			resp.Results = append(resp.Results, rr)
		}
		return resp
	}
	return admin(req, code)
}

// admin answers the admin requests whose error fields are per topic, resource, binding or
// user, or one top-level code.
func admin(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, name := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), code
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DescribeConfigsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rs := range r.Resources {
			o := kmsg.NewDescribeConfigsResponseResource()
			o.ResourceType, o.ResourceName, o.ErrorCode = rs.ResourceType, rs.ResourceName, code
			resp.Resources = append(resp.Resources, o)
		}
		return resp
	case *kmsg.AlterConfigsRequest:
		resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rs := range r.Resources {
			o := kmsg.NewAlterConfigsResponseResource()
			o.ResourceType, o.ResourceName, o.ErrorCode = rs.ResourceType, rs.ResourceName, code
			resp.Resources = append(resp.Resources, o)
		}
		return resp
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rs := range r.Resources {
			o := kmsg.NewIncrementalAlterConfigsResponseResource()
			o.ResourceType, o.ResourceName, o.ErrorCode = rs.ResourceType, rs.ResourceName, code
			resp.Resources = append(resp.Resources, o)
		}
		return resp
	case *kmsg.CreateACLsRequest:
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			o := kmsg.NewCreateACLsResponseResult()
			o.ErrorCode = code
			resp.Results = append(resp.Results, o)
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			o := kmsg.NewDeleteACLsResponseResult()
			o.ErrorCode = code
			resp.Results = append(resp.Results, o)
		}
		return resp
	case *kmsg.DescribeACLsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DescribeClientQuotasRequest:
		resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AlterClientQuotasRequest:
		resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range r.Entries {
			o := kmsg.NewAlterClientQuotasResponseEntry()
			o.ErrorCode = code
			for _, en := range e.Entity {
				oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
				oe.Type, oe.Name = en.Type, en.Name
				o.Entity = append(o.Entity, oe)
			}
			resp.Entries = append(resp.Entries, o)
		}
		return resp
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode = code
		for _, u := range r.Users {
			o := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			o.User, o.ErrorCode = u.Name, code
			resp.Results = append(resp.Results, o)
		}
		return resp
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		// One result per user named, as the broker answers (ControllerApis groups the
		// deletions and upsertions by user).
		seen := map[string]bool{}
		add := func(user string) {
			if seen[user] {
				return
			}
			seen[user] = true
			o := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			o.User, o.ErrorCode = user, code
			resp.Results = append(resp.Results, o)
		}
		for _, d := range r.Deletions {
			add(d.Name)
		}
		for _, u := range r.Upsertions {
			add(u.Name)
		}
		return resp
	case *kmsg.DescribeLogDirsRequest:
		// Only v3+ has a field for it; earlier versions answer no directories, as Kafka's
		// DescribeLogDirsRequest.getErrorResponse does.
		resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = code
		return resp
	}
	return nil
}

func produce(r *kmsg.ProduceRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fetch sets the top-level code too (v7+), and every partition's, as Kafka's
// FetchRequest.getErrorResponse does before v13.
func fetch(r *kmsg.FetchRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	for _, t := range r.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.PreferredReadReplica = -1
			rp.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null set
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func listOffsets(r *kmsg.ListOffsetsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func offsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.LeaderEpoch, rp.EndOffset = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func offsetCommit(r *kmsg.OffsetCommitRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetFetch answers v8+ per group, earlier versions with the top-level code (v2+) and
// each partition named (a request for all partitions names none).
func offsetFetch(r *kmsg.OffsetFetchRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.ErrorCode = code
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rp.Offset, rp.LeaderEpoch = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, g := range r.Groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, code
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rp.Offset, rp.LeaderEpoch = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// findCoordinator answers v4+ per key, earlier versions with the one coordinator field set.
func findCoordinator(r *kmsg.FindCoordinatorRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	for _, k := range r.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.ErrorCode, c.NodeID, c.Port = k, code, -1, -1
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

func txnOffsetCommit(r *kmsg.TxnOffsetCommitRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// addPartitionsToTxn answers v0-v3 per partition, v4+ (brokers' batched form, KIP-890) with
// the top-level code and per transaction's partition.
func addPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.ErrorCode = code
	for _, t := range r.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, x := range r.Transactions {
		rx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rx.TransactionalID = x.TransactionalID
		for _, t := range x.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rx.Topics = append(rx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rx)
	}
	return resp
}

func offsetDelete(r *kmsg.OffsetDeleteRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = code
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func deleteRecords(r *kmsg.DeleteRecordsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func describeProducers(r *kmsg.DescribeProducersRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// electLeaders sets the top-level code (v1+) and each partition named (a request for every
// partition names none).
func electLeaders(r *kmsg.ElectLeadersRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, t := range r.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func alterPartitionAssignments(r *kmsg.AlterPartitionAssignmentsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.ErrorCode = code
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
