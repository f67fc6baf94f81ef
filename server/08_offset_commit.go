package server

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetCommit v0-v8. v1 carries a commit timestamp, v2-v4 a retention time (ignored, as
// Kafka ignores it since 2.1), v6 leader epochs, v7 group instance ids, v8 the flexible
// encoding. v9 (KIP-848 member epochs) and v10 (topic ids) are not advertised. Offsets are
// durable (one synced Pebble batch) before the response.
const offsetCommitKey = 8

func init() {
	register(api{key: offsetCommitKey, min: 0, max: 8, handle: handleOffsetCommit})
}

func handleOffsetCommit(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	return s.groups.Commit(kreq.(*kmsg.OffsetCommitRequest)), nil
}
