package e2e

import (
	"sync/atomic"
	"testing"

	"inlet/objstore"
	"inlet/wire"
)

// TestProduceRefusedWhileNotTheWriter: while the node does not hold its bucket prefix's lease
// (server.Config.Writable false), produce to a topic kept in the bucket is answered
// NOT_LEADER_OR_FOLLOWER and nothing is appended, and a reply built after the lease ran out
// (the batch already written) says the same, never success; a topic on the local disk alone
// goes on. Once fenced (server.Config.Fenced true), every produce is refused.
func TestProduceRefusedWhileNotTheWriter(t *testing.T) {
	var writable, fenced atomic.Bool
	var calls atomic.Int64
	var mode atomic.Int32 // 0: writable as set; 1: writable at the request, not at its reply
	writable.Store(true)
	b := &broker{t: t, dir: t.TempDir(), cfg: tieredServerConfig(), remote: tierConfig(objstore.NewMemory())}
	b.cfg.Writable = func() bool {
		if mode.Load() == 1 {
			return calls.Add(1) == 1
		}
		return writable.Load()
	}
	b.cfg.Fenced = fenced.Load
	b.start()
	t.Cleanup(b.stop)
	createTieredTopic(t, b, 1, nil)
	b.createTopic("local", 1)
	rc := dialRaw(t, b.addr)

	writable.Store(false)
	if p := rc.produceOne(9, tierTopic, 0, plainBatch(1, 1000, "refused").encode()); p.ErrorCode != wire.ErrNotLeaderOrFollower {
		t.Fatalf("produce to a tiered topic while not the writer: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
	if hw := b.highWatermark(tierTopic, 0); hw != 0 {
		t.Fatalf("a refused produce was appended: high watermark %d", hw)
	}
	if p := rc.produceOne(9, "local", 0, plainBatch(1, 1000, "local-goes-on").encode()); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce to a local topic while the lease lapsed: error %d offset %d, want success", p.ErrorCode, p.BaseOffset)
	}
	writable.Store(true)
	if p := rc.produceOne(9, tierTopic, 0, plainBatch(1, 1000, "taken").encode()); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce while the writer: error %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	mode.Store(1)
	if p := rc.produceOne(9, tierTopic, 0, plainBatch(1, 1000, "lapsed").encode()); p.ErrorCode != wire.ErrNotLeaderOrFollower {
		t.Fatalf("produce whose lease ran out before its reply: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
	if calls.Load() != 2 {
		t.Fatalf("Writable called %d times for one produce, want 2 (request and reply)", calls.Load())
	}
	mode.Store(0)
	fenced.Store(true)
	if p := rc.produceOne(9, "local", 0, plainBatch(1, 1000, "fenced").encode()); p.ErrorCode != wire.ErrNotLeaderOrFollower {
		t.Fatalf("produce to a local topic once fenced: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
	if hw := b.highWatermark("local", 0); hw != 1 {
		t.Fatalf("local high watermark %d after the fenced produce, want 1", hw)
	}
}
