package server

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetDelete v0 (KIP-496): deletes committed offsets of topics the group does not consume.
const offsetDeleteKey = 47

func init() {
	register(api{key: offsetDeleteKey, min: 0, max: 0, handle: handleOffsetDelete})
}

func handleOffsetDelete(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	return s.groups.DeleteOffsets(kreq.(*kmsg.OffsetDeleteRequest)), nil
}
