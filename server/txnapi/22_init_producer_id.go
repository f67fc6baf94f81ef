package txnapi

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/meta"
	"inlet/server/authz"
	"inlet/wire"
)

// InitProducerId v0-v4. Without a transactional id every call gets a new producer id at
// epoch 0, as Kafka's TransactionCoordinator.handleInitProducerId does for a null
// transactional id. With one, the transaction coordinator (package txn) hands out the id's
// producer id with its epoch bumped, fencing the previous producer and aborting its open
// transaction; v3+ may name the caller's current id and epoch (KIP-360), and v4+ is told
// PRODUCER_FENCED where older versions get INVALID_PRODUCER_EPOCH (KIP-588). v5+ belongs to
// transaction.version 2 (KIP-890) and is not advertised.
const initProducerIDKey = 22

func init() {
	register(API{Key: initProducerIDKey, Min: 0, Max: 4, Handle: handleInitProducerID,
		Authz: before(authorizeInitProducerID, onTxnIDs(acl.Write), onCluster(acl.IdempotentWrite), onTopics(acl.Write))})
}

func handleInitProducerID(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			// TransactionCoordinator.handleInitProducerId refuses an empty id.
			resp.ErrorCode = wire.ErrInvalidRequest
			return resp, nil
		}
		id, epoch, code := s.Txns.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch)
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = id, epoch, fenced(code, req.Version, 4)
		return resp, nil
	}
	id, err := s.Log.Meta().AllocateProducerID()
	if err != nil {
		s.Logger.Error("allocate producer id", "err", err)
		resp.ErrorCode = wire.ErrUnknownServerError
		if errors.Is(err, meta.ErrProducerIDsUnavailable) { // the bucket refused a block: retriable (KIP-730)
			resp.ErrorCode = wire.ErrCoordinatorLoadInProgress
		}
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// authorizeInitProducerID: WRITE on the transactional id, or for an idempotent producer
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
func authorizeInitProducerID(s *Server, p authz.Subject, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	// KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id; without one
	// (an idempotent producer), IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
	code := int16(0)
	switch {
	case req.TransactionalID != nil:
		if !p.TxnID(acl.Write, *req.TransactionalID) {
			code = wire.ErrTransactionalIDAuthorizationFailed
		}
	case !p.Cluster(acl.IdempotentWrite) && !p.AnyTopic(acl.Write):
		code = wire.ErrClusterAuthorizationFailed
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp, nil
	}
	return nil, nil
}
