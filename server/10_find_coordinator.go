package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/wire"
)

// FindCoordinator v0-v4. One broker: the node coordinates every group (key type 0) and every
// transactional id (key type 1). v4 batches keys (KIP-699). v5 (KIP-890's
// TRANSACTION_ABORTABLE) and v6 (share groups) are not advertised.
const findCoordinatorKey = 10

func init() {
	register(api{key: findCoordinatorKey, min: 0, max: 4, handle: handleFindCoordinator,
		authz: unchecked("this node coordinates every group and transactional id: the answer is the same for any name")})
}

func handleFindCoordinator(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	code := int16(0)
	var msg *string
	if req.CoordinatorType != 0 && req.CoordinatorType != 1 {
		code = wire.ErrInvalidRequest
		m := "unknown coordinator type"
		msg = &m
	}
	if req.CoordinatorType == 0 {
		// Kafka creates its offsets topic when a group coordinator is first looked up.
		if _, err := s.blog.EnsureOffsetsTopic(); err != nil {
			s.log.Error("create the offsets topic", "err", err)
		}
	}
	host, port := r.c.Advertised() // the request's listener's, as Metadata
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		resp.NodeID, resp.Host, resp.Port = s.cfg.NodeID, host, port
		if code != 0 {
			resp.NodeID, resp.Host, resp.Port = -1, "", -1
		}
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage = code, msg
		c.NodeID, c.Host, c.Port = s.cfg.NodeID, host, port
		if code != 0 {
			c.NodeID, c.Host, c.Port = -1, "", -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}
