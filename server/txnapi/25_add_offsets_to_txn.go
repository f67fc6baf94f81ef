package txnapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// AddOffsetsToTxn v0-v3: the group's offsets may be committed in the transaction
// (TxnOffsetCommit). Kafka adds the group's __consumer_offsets partition to the transaction;
// here offsets are not records, so the coordinator notes the group. PRODUCER_FENCED from v2.
const addOffsetsToTxnKey = 25

func init() {
	register(API{Key: addOffsetsToTxnKey, Min: 0, Max: 3, Handle: handleAddOffsetsToTxn,
		Authz: inHandler(onTxnIDs(acl.Write), onGroups(acl.Read))})
}

func handleAddOffsetsToTxn(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	p := r.Subject
	switch {
	case !p.TxnID(acl.Write, req.TransactionalID):
		resp.ErrorCode = wire.ErrTransactionalIDAuthorizationFailed
	case !p.Group(acl.Read, req.Group):
		resp.ErrorCode = wire.ErrGroupAuthorizationFailed
	case req.Group == "":
		resp.ErrorCode = wire.ErrInvalidGroupID
	default:
		resp.ErrorCode = fenced(s.Txns.AddGroup(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), req.Version, 2)
	}
	return resp, nil
}
