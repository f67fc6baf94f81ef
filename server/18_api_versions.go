package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/transport"
	"inlet/wire"
)

// ApiVersions v0-v4 (KIP-35, KIP-511 client name/version in v3+). No features are finalized:
// transaction.version >= 2 (KIP-890) is not implemented, so clients keep to the classic
// protocol.
const apiVersionsKey = 18

func init() {
	register(api{key: apiVersionsKey, min: 0, max: 4, handle: handleAPIVersions,
		authz: unchecked("served before authentication")})
}

func handleAPIVersions(s *Server, r *request, req kmsg.Request) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = SupportedAPIs()
	return resp, nil
}

// apiVersionsUnsupported is the v0 reply to an ApiVersions version above 4.
func apiVersionsUnsupported(correlationID int32) *transport.Out {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = wire.ErrUnsupportedVersion
	resp.ApiKeys = SupportedAPIs()
	out := newReply(correlationID, false, 1024)
	out.B = resp.AppendTo(out.B)
	wire.PatchFrameLength(out.B)
	return out
}
