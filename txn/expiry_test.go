package txn

import (
	"strings"
	"testing"
	"time"

	"inlet/wire"
)

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

// TestIdleTransactionalIDsExpire: transactional.id.expiration.ms forgets an id with no
// transaction open and no change for its default 7 days, whatever state it ended in; an id
// with a transaction open, or changed since, stays. The record is deleted, so a restart does
// not bring it back, and an id used again starts as a new one.
func TestIdleTransactionalIDsExpire(t *testing.T) {
	store := &memStore{recs: map[string][]byte{}}
	h := newHarness(t, store)
	pidIdle, e, code := h.c.InitProducerID("idle", 60000, -1, -1) // Empty
	want(t, "init idle", code, wire.ErrNone)
	pidDone, eDone, _ := h.c.InitProducerID("done", 60000, -1, -1) // CompleteCommit
	want(t, "add", h.c.AddPartitions("done", pidDone, eDone, []TopicPartition{tp0}), wire.ErrNone)
	want(t, "commit", h.c.EndTxn("done", pidDone, eDone, true), wire.ErrNone)
	pidOpen, eOpen, _ := h.c.InitProducerID("open", 900000, -1, -1) // Ongoing
	want(t, "add", h.c.AddPartitions("open", pidOpen, eOpen, []TopicPartition{tp1}), wire.ErrNone)
	_, _, _ = h.c.InitProducerID("busy", 60000, -1, -1)

	h.advance(DefaultIDExpiration - time.Millisecond)
	if n := h.c.ExpireIDs(h.c.cfg.Now()); n != 0 {
		t.Fatalf("%d ids expired before transactional.id.expiration.ms", n)
	}
	_, _, code = h.c.InitProducerID("busy", 60000, -1, -1) // a change: counts again from now
	want(t, "init busy again", code, wire.ErrNone)
	h.advance(time.Millisecond)
	if n := h.c.ExpireIDs(h.c.cfg.Now()); n != 2 {
		t.Fatalf("%d ids expired, want 2 (idle, done)", n)
	}
	for _, id := range []string{"idle", "done"} {
		if _, ok := h.c.Describe(id); ok {
			t.Errorf("%s still described after it expired", id)
		}
		if _, ok := store.recs[id]; ok {
			t.Errorf("%s: record still stored", id)
		}
	}
	for _, id := range []string{"open", "busy"} {
		if _, ok := h.c.Describe(id); !ok {
			t.Errorf("%s expired", id)
		}
	}
	// The expired producer is no longer known; the id starts again as a new one.
	want(t, "add after expiry", h.c.AddPartitions("idle", pidIdle, e, []TopicPartition{tp0}), wire.ErrInvalidProducerIDMapping)
	pid, epoch, code := h.c.InitProducerID("idle", 60000, -1, -1)
	want(t, "init after expiry", code, wire.ErrNone)
	if pid == pidIdle || epoch != 0 {
		t.Fatalf("an expired id came back as producer %d epoch %d", pid, epoch)
	}
	h.c.Close()

	// After a restart the stored update times count on: "busy" expires a week after its change.
	h2 := newHarness(t, store)
	// "busy" changed 1 ms before "idle" was initialised again.
	h2.now = h.now.Add(DefaultIDExpiration - 2*time.Millisecond)
	if n := h2.c.ExpireIDs(h2.c.cfg.Now()); n != 0 {
		t.Fatalf("after restart, %d ids expired early", n)
	}
	h2.advance(time.Millisecond)
	if n := h2.c.ExpireIDs(h2.c.cfg.Now()); n != 1 {
		t.Fatalf("after restart, %d ids expired, want 1 (busy)", n)
	}
	h2.advance(time.Millisecond)
	if n := h2.c.ExpireIDs(h2.c.cfg.Now()); n != 1 {
		t.Fatalf("after restart, %d ids expired, want 1 (idle)", n)
	}
	if _, ok := h2.c.Describe("open"); !ok {
		t.Fatal("an id with a transaction open expired")
	}
}

// TestTransactionalIDExpirationIsConfigurable: a shorter transactional.id.expiration.ms
// applies; a negative one never expires anything.
func TestTransactionalIDExpirationIsConfigurable(t *testing.T) {
	h := newHarness(t, &memStore{recs: map[string][]byte{}})
	h.c.cfg.IDExpiration = time.Minute
	_, _, _ = h.c.InitProducerID("t", 60000, -1, -1)
	h.advance(time.Minute)
	h.c.cfg.IDExpiration = -1
	if n := h.c.ExpireIDs(h.c.cfg.Now()); n != 0 {
		t.Fatalf("expiry disabled, %d expired", n)
	}
	h.c.cfg.IDExpiration = time.Minute
	if n := h.c.ExpireIDs(h.c.cfg.Now()); n != 1 {
		t.Fatalf("%d expired after a minute, want 1", n)
	}
}

// TestOverlongTransactionalIDIsRefused: a transactional id Kafka could not read (longer than
// 32767 bytes) or that is not UTF-8 is INVALID_REQUEST and nothing is stored; one at the limit
// is served and survives a restart.
func TestOverlongTransactionalIDIsRefused(t *testing.T) {
	store := &memStore{recs: map[string][]byte{}}
	h := newHarness(t, store)
	long := strings.Repeat("t", wire.MaxStringLength)
	if _, _, code := h.c.InitProducerID(long+"x", 60000, -1, -1); code != wire.ErrInvalidRequest {
		t.Fatalf("a %d-byte id: code %d", len(long)+1, code)
	}
	if _, _, code := h.c.InitProducerID("bad\xff", 60000, -1, -1); code != wire.ErrInvalidRequest {
		t.Fatalf("a non-UTF-8 id: code %d", code)
	}
	if len(store.recs) != 0 {
		t.Fatalf("refused ids stored: %d records", len(store.recs))
	}
	pid, epoch, code := h.c.InitProducerID(long, 60000, -1, -1)
	want(t, "init at the limit", code, wire.ErrNone)
	want(t, "add group not UTF-8", h.c.AddGroup(long, pid, epoch, "g\xfe"), wire.ErrInvalidGroupID)
	want(t, "add group", h.c.AddGroup(long, pid, epoch, "g"), wire.ErrNone)
	want(t, "metadata not UTF-8", h.c.CommitOffsets(long, pid, epoch, "g", []PendingOffset{{Topic: "a", Metadata: "\xc3"}}), wire.ErrInvalidRequest)
	h.c.Close()
	h2 := newHarness(t, store)
	if d, ok := h2.c.Describe(long); !ok || d.ProducerID != pid {
		t.Fatalf("the id at the limit after a restart: %+v %v", d, ok)
	}
}

// TestBadStoredRecordIsSkipped: a stored record that does not decode is logged and skipped;
// the coordinator starts with the others.
func TestBadStoredRecordIsSkipped(t *testing.T) {
	store := &memStore{recs: map[string][]byte{}}
	h := newHarness(t, store)
	_, _, _ = h.c.InitProducerID("good", 60000, -1, -1)
	h.c.Close()
	store.recs["bad"] = []byte("{not json")
	h2 := newHarness(t, store)
	if _, ok := h2.c.Describe("good"); !ok {
		t.Fatal("the good record was not loaded")
	}
	if _, ok := h2.c.Describe("bad"); ok {
		t.Fatal("the bad record was loaded")
	}
}
