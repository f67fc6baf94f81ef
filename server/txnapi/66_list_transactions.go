package txnapi

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/txn"
)

// ListTransactions v0-v1 (KIP-664, v1's duration filter KIP-994): the transactional ids,
// filtered by state, producer id and, from v1, how long their transaction has been open.
// State names Kafka does not know come back in UnknownStateFilters. A principal sees only its
// own ids. v2's id pattern (a Java regular expression, KIP-1152) is not advertised.
const listTransactionsKey = 66

func init() {
	register(API{Key: listTransactionsKey, Min: 0, Max: 1, Handle: handleListTransactions,
		Authz: inHandler(onTxnIDs(acl.Describe))})
}

func handleListTransactions(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	p := r.Subject
	states := map[string]bool{}
	for _, f := range req.StateFilters {
		if !slices.Contains(txn.StateNames, f) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
			continue
		}
		states[f] = true
	}
	now := time.Now().UnixMilli()
	for _, d := range s.Txns.List() {
		switch {
		case !p.TxnID(acl.Describe, d.ID):
		case len(req.StateFilters) > 0 && !states[d.State.String()]:
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, d.ProducerID):
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && (d.State != txn.Ongoing || now-d.StartMs < req.DurationFilterMillis):
		default:
			st := kmsg.NewListTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.TransactionState = d.ID, d.ProducerID, d.State.String()
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
	}
	return resp, nil
}
