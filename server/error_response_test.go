package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestErrorResponseCoversEveryServedAPI: every API the node serves, but those answered with
// what a node knows, has an error response at every version it serves, so that an API
// registered later cannot be forgotten by a standby's answers.
func TestErrorResponseCoversEveryServedAPI(t *testing.T) {
	known := map[int16]bool{metadataKey: true, apiVersionsKey: true, saslHandshakeKey: true, saslAuthenticateKey: true}
	for _, k := range SupportedAPIs() {
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			req := kmsg.RequestForKey(k.ApiKey)
			req.SetVersion(v)
			resp := ErrorResponse(req, 6)
			switch {
			case known[k.ApiKey] && resp != nil:
				t.Errorf("%s v%d: an error response, want nil", kmsg.NameForKey(k.ApiKey), v)
			case !known[k.ApiKey] && resp == nil:
				t.Errorf("%s v%d: no error response", kmsg.NameForKey(k.ApiKey), v)
			}
		}
	}
}
