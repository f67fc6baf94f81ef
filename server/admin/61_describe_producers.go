package admin

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/server/authz"
	"inlet/wire"
)

// DescribeProducers v0 (KIP-664): the idempotent producers each partition remembers, with
// their epoch, the last sequence and the last batch's max timestamp (-1 once retention has
// removed that batch), and the first offset of its open transaction on the partition (-1:
// none). The coordinator epoch is -1: one coordinator, never moved. The windows are read on the batch log's committer and
// answered once durable (batchlog.Log.Producers). Topics outside a principal's prefixes are
// TOPIC_AUTHORIZATION_FAILED (package server/authz), as Kafka needs READ on the topic.
const describeProducersKey = 61

func init() {
	register(API{Key: describeProducersKey, Min: 0, Max: 0, Handle: handleDescribeProducers,
		Authz: before(authorizeDescribeProducers, onTopics(acl.Read))})
}

func handleDescribeProducers(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewDescribeProducersResponseTopic()
		ot.Topic = rt.Topic
		t, ok := s.blog.Topic(rt.Topic)
		for _, i := range rt.Partitions {
			op := kmsg.NewDescribeProducersResponseTopicPartition()
			op.Partition = i
			if !ok || i < 0 || int(i) >= len(t.Partitions) {
				op.ErrorCode = wire.ErrUnknownTopicOrPartition
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			windows, err := s.blog.Producers(t.Partitions[i])
			if err != nil {
				s.log.Error("describe producers", "topic", rt.Topic, "partition", i, "err", err)
				op.ErrorCode = wire.ErrUnknownServerError
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			for _, w := range windows {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = w.ProducerID, int32(w.Epoch)
				ap.LastSequence, ap.LastTimestamp = w.LastSequence, w.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, w.TxnStartOffset
				op.ActiveProducers = append(op.ActiveProducers, ap)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}

// authorizeDescribeProducers: READ on each topic (KafkaApis.handleDescribeProducersRequest).
func authorizeDescribeProducers(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	var denied []kmsg.DescribeProducersRequestTopic
	req.Topics, denied = authz.SplitAllowed(req.Topics, func(t kmsg.DescribeProducersRequestTopic) bool { return p.Topic(acl.Read, t.Topic) })
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
}
