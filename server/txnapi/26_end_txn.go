package txnapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// EndTxn v0-v3: commit or abort the producer's transaction. Answered once the decision is
// durable and, normally, once the markers are written and the offsets applied (package
// txn). PRODUCER_FENCED from v2. v4+ (TRANSACTION_ABORTABLE, KIP-890) is not advertised.
const endTxnKey = 26

func init() {
	register(API{Key: endTxnKey, Min: 0, Max: 3, Handle: handleEndTxn,
		Authz: inHandler(onTxnIDs(acl.Write))})
}

func handleEndTxn(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !r.Subject.TxnID(acl.Write, req.TransactionalID) {
		resp.ErrorCode = wire.ErrTransactionalIDAuthorizationFailed
		return resp, nil
	}
	resp.ErrorCode = fenced(s.Txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), req.Version, 2)
	return resp, nil
}
