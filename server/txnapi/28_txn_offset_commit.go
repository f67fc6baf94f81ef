package txnapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/groups"
	"inlet/txn"
	"inlet/wire"
)

// TxnOffsetCommit v0-v3: offsets committed inside a transaction, applied to the group when it
// commits and dropped when it aborts. v3 brings the member id, instance id and generation
// (KIP-447), checked against the group as OffsetCommit does. v4+ (KIP-890) is not advertised.
// Until the transaction ends, OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT
// for these partitions.
const txnOffsetCommitKey = 28

func init() {
	register(API{Key: txnOffsetCommitKey, Min: 0, Max: 3, Handle: handleTxnOffsetCommit,
		Authz: inHandler(onTxnIDs(acl.Write), onGroups(acl.Read), onTopics(acl.Read))})
}

func handleTxnOffsetCommit(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	p := r.Subject
	code := wire.ErrNone
	switch {
	case !p.TxnID(acl.Write, req.TransactionalID):
		code = wire.ErrTransactionalIDAuthorizationFailed
	case !p.Group(acl.Read, req.Group):
		code = wire.ErrGroupAuthorizationFailed
	default:
		generation, member := int32(-1), ""
		if req.Version >= 3 {
			generation, member = req.Generation, req.MemberID
		}
		if existed, ok := r.AdmitGroup(req.Group, true); !ok { // max.groups.per.principal
			code = groups.ErrGroupBound
		} else {
			code = s.Groups.CheckTxnCommit(req.Group, member, req.InstanceID, generation)
			r.OwnGroup(req.Group, existed)
		}
	}
	// KafkaApis.handleTxnOffsetCommitRequest: without WRITE on the transactional id or READ
	// on the group every partition carries that error; otherwise a topic the principal may
	// not read is TOPIC_AUTHORIZATION_FAILED before it is looked up (its existence and
	// partition count stay hidden) and nothing of it is committed.
	denied := code == wire.ErrTransactionalIDAuthorizationFailed || code == wire.ErrGroupAuthorizationFailed
	codes := map[txn.TopicPartition]int16{}
	var offsets []txn.PendingOffset
	for _, rt := range req.Topics {
		if denied {
			break
		}
		t, ok := s.Log.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			tp := txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			md := ""
			if rp.Metadata != nil {
				md = *rp.Metadata
			}
			switch {
			case !p.Topic(acl.Read, rt.Topic):
				codes[tp] = wire.ErrTopicAuthorizationFailed
			case !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				codes[tp] = wire.ErrUnknownTopicOrPartition
			case len(md) > s.Groups.MaxMetadataBytes():
				codes[tp] = wire.ErrOffsetMetadataTooLarge
			default:
				offsets = append(offsets, txn.PendingOffset{Topic: rt.Topic, Partition: rp.Partition,
					Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: md})
			}
		}
	}
	if code == wire.ErrNone && len(offsets) > 0 {
		code = s.Txns.CommitOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, offsets)
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition, op.ErrorCode = rp.Partition, code
			if c, ok := codes[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; ok {
				op.ErrorCode = c
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
