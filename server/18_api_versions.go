package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/transport"
	"inlet/wire"
)

// ApiVersions v0-v4 (KIP-35, KIP-511 client name/version in v3+, KIP-584 features in v3+).
// The features listed are those the node implements: group.version 0-1 (1: KIP-848's
// consumer groups), finalized at 1 while group.coordinator.rebalance.protocols lists
// "consumer" (a feature at level 0 is not listed as finalized, as Kafka). Kafka 4 also lists
// metadata.version and kraft.version (its KRaft quorum; Inlet has none) and
// transaction.version (KIP-890's level 2 is not implemented): none of them is advertised.
// Features are fixed at start-up, so their epoch is 0.
const apiVersionsKey = 18

func init() {
	register(api{key: apiVersionsKey, min: 0, max: 4, handle: handleAPIVersions,
		authz: unchecked("served before authentication")})
}

func handleAPIVersions(s *Server, r *request, req kmsg.Request) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = SupportedAPIs()
	if resp.Version >= 3 {
		resp.SupportedFeatures, resp.FinalizedFeatures = Features(s.cfg.RebalanceProtocols)
		resp.FinalizedFeaturesEpoch = 0
	}
	return resp, nil
}

// Features is what ApiVersions v3+ lists (KIP-584), in one place, for a node whose
// Config.RebalanceProtocols is rebalanceProtocols (a standby's front lists the same).
func Features(rebalanceProtocols []string) ([]kmsg.ApiVersionsResponseSupportedFeature, []kmsg.ApiVersionsResponseFinalizedFeature) {
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = "group.version", 0, 1
	var finalized []kmsg.ApiVersionsResponseFinalizedFeature
	if consumerProtocolOn(rebalanceProtocols) {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "group.version", 1, 1
		finalized = append(finalized, ff)
	}
	return []kmsg.ApiVersionsResponseSupportedFeature{sf}, finalized
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
