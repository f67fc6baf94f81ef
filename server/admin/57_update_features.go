package admin

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/wire"
)

// UpdateFeatures v0-v2 (KIP-584; v1 upgrade types and validate-only, v2 without per-feature
// results). The node's one versioned feature, group.version (ApiVersions), is set by its
// configuration (group.coordinator.rebalance.protocols), not at run time, and no other is
// supported (transaction.version 2 needs KIP-890's server side, which is not built). So every
// update is INVALID_UPDATE_VERSION, the error Kafka's controller gives for a level it does
// not support, validate-only or not, and an empty request succeeds.
//
// As Kafka's QuorumController.updateFeatures: the request is all or nothing, so a failure is
// the top-level error, in every version, prefixed "The update failed for all features since
// the following feature had an error: ", and then no per-feature result is sent (v0-v1 list
// them only on success).
const updateFeaturesKey = 57

func init() {
	register(API{Key: updateFeaturesKey, Min: 0, Max: 2, Handle: handleUpdateFeatures,
		Authz: before(authorizeUpdateFeatures, onCluster(acl.Alter))})
}

func handleUpdateFeatures(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	if len(req.FeatureUpdates) > 0 {
		u := req.FeatureUpdates[0]
		msg := fmt.Sprintf("Invalid update version %d for feature %s. This node's features are set by its configuration, not changed at run time.", u.MaxVersionLevel, u.Feature)
		if u.MaxVersionLevel < 1 {
			msg = fmt.Sprintf("Cannot delete feature %s: it is not finalized.", u.Feature)
		}
		msg = "The update failed for all features since the following feature had an error: " + msg
		resp.ErrorCode, resp.ErrorMessage = wire.ErrInvalidUpdateVersion, &msg
	}
	return resp, nil
}
