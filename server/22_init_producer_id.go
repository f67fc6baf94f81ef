package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// InitProducerId v0-v4 for idempotent producers (no transactional id): every call gets a new
// producer id at epoch 0, as Kafka's TransactionCoordinator.handleInitProducerId does for a
// null transactional id (v3+'s producer id/epoch fields matter only with a transactional id).
// v5+ belongs to transaction.version 2 (KIP-890) and is not advertised.
const initProducerIDKey = 22

func init() {
	register(api{key: initProducerIDKey, min: 0, max: 4, handle: handleInitProducerID})
}

func handleInitProducerID(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		// Transactions are not served yet: refuse clearly instead of handing out an id the
		// coordinator APIs could not back.
		resp.ErrorCode = wire.ErrTransactionalIDAuthorizationFailed
		return resp, nil
	}
	id, err := s.blog.AllocateProducerID()
	if err != nil {
		s.log.Error("allocate producer id", "err", err)
		resp.ErrorCode = wire.ErrUnknownServerError
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
