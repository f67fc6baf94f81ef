package txnapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/txn"
	"inlet/wire"
)

// AddPartitionsToTxn v0-v3, the client versions (v4+ batches transactions for brokers,
// KIP-890, and is not advertised). Every partition must exist and be writable by the
// principal: otherwise the bad ones get UNKNOWN_TOPIC_OR_PARTITION or
// TOPIC_AUTHORIZATION_FAILED and the rest OPERATION_NOT_ATTEMPTED, and nothing is added, as
// KafkaApis answers. PRODUCER_FENCED from v2 (KIP-588).
const addPartitionsToTxnKey = 24

func init() {
	register(API{Key: addPartitionsToTxnKey, Min: 0, Max: 3, Handle: handleAddPartitionsToTxn,
		Authz: inHandler(onTxnIDs(acl.Write), onTopics(acl.Write))})
}

func handleAddPartitionsToTxn(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	p := r.Subject
	var parts []txn.TopicPartition
	codes := map[txn.TopicPartition]int16{}
	bad := false
	for _, rt := range req.Topics {
		t, ok := s.Log.Topic(rt.Topic)
		for _, i := range rt.Partitions {
			tp := txn.TopicPartition{Topic: rt.Topic, Partition: i}
			switch {
			case !p.Topic(acl.Write, rt.Topic):
				codes[tp], bad = wire.ErrTopicAuthorizationFailed, true
			case !ok || t.Internal() || i < 0 || int(i) >= len(t.Partitions):
				codes[tp], bad = wire.ErrUnknownTopicOrPartition, true
			}
			parts = append(parts, tp)
		}
	}
	code := wire.ErrNone
	switch {
	case !p.TxnID(acl.Write, req.TransactionalID):
		code = wire.ErrTransactionalIDAuthorizationFailed
	case bad:
		code = wire.ErrOperationNotAttempted
	default:
		code = fenced(s.Txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts), req.Version, 2)
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewAddPartitionsToTxnResponseTopic()
		ot.Topic = rt.Topic
		for _, i := range rt.Partitions {
			op := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			op.Partition, op.ErrorCode = i, code
			if c, ok := codes[txn.TopicPartition{Topic: rt.Topic, Partition: i}]; ok && code == wire.ErrOperationNotAttempted {
				op.ErrorCode = c
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
