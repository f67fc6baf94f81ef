package e2e

import (
	"sync/atomic"
	"testing"

	"inlet/server"
	"inlet/wire"
)

// TestProduceRefusedWhileNotTheWriter: while the node does not hold its bucket prefix's lease
// (server.Config.Writable false), produce is answered NOT_LEADER_OR_FOLLOWER and nothing is
// appended; a reply built after the lease ran out (the batch already written) says the same,
// never success.
func TestProduceRefusedWhileNotTheWriter(t *testing.T) {
	var writable atomic.Bool
	var calls atomic.Int64
	var mode atomic.Int32 // 0: writable as set; 1: writable at the request, not at its reply
	b := startBroker(t, func(c *server.Config) {
		c.Writable = func() bool {
			if mode.Load() == 1 {
				return calls.Add(1) == 1
			}
			return writable.Load()
		}
	})
	b.createTopic("gate", 1)
	rc := dialRaw(t, b.addr)

	if p := rc.produceOne(9, "gate", 0, plainBatch(1, 1000, "refused").encode()); p.ErrorCode != wire.ErrNotLeaderOrFollower {
		t.Fatalf("produce while not the writer: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
	if hw := b.highWatermark("gate", 0); hw != 0 {
		t.Fatalf("a refused produce was appended: high watermark %d", hw)
	}
	writable.Store(true)
	if p := rc.produceOne(9, "gate", 0, plainBatch(1, 1000, "taken").encode()); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce while the writer: error %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	mode.Store(1)
	if p := rc.produceOne(9, "gate", 0, plainBatch(1, 1000, "lapsed").encode()); p.ErrorCode != wire.ErrNotLeaderOrFollower {
		t.Fatalf("produce whose lease ran out before its reply: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
	if calls.Load() != 2 {
		t.Fatalf("Writable called %d times for one produce, want 2 (request and reply)", calls.Load())
	}
}
