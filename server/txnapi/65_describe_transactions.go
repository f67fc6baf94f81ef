package txnapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// DescribeTransactions v0 (KIP-664): each transactional id's state, producer id and epoch,
// timeout, start time and partitions. An id never initialised is TRANSACTIONAL_ID_NOT_FOUND;
// one outside the principal's prefixes TRANSACTIONAL_ID_AUTHORIZATION_FAILED; partitions of
// topics outside them are left out.
const describeTransactionsKey = 65

func init() {
	register(API{Key: describeTransactionsKey, Min: 0, Max: 0, Handle: handleDescribeTransactions,
		Authz: inHandler(onTxnIDs(acl.Describe), onTopics(acl.Describe))})
}

func handleDescribeTransactions(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	p := r.Subject
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		d, ok := s.Txns.Describe(id)
		switch {
		case !p.TxnID(acl.Describe, id):
			st.ErrorCode = wire.ErrTransactionalIDAuthorizationFailed
		case !ok:
			st.ErrorCode = wire.ErrTransactionalIDNotFound
		default:
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State.String(), d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
			at := map[string]int{} // topic -> its index in st.Topics
			for _, tp := range d.Partitions {
				if !p.Topic(acl.Describe, tp.Topic) {
					// KafkaApis.handleDescribeTransactionsRequest lists only the partitions
					// of topics the principal may describe.
					continue
				}
				if i, ok := at[tp.Topic]; ok {
					st.Topics[i].Partitions = append(st.Topics[i].Partitions, tp.Partition)
					continue
				}
				at[tp.Topic] = len(st.Topics)
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
				st.Topics = append(st.Topics, t)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
