package txn

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"inlet/wire"
)

// memStore is a Store in memory; fail makes SaveTxn fail.
type memStore struct {
	mu      sync.Mutex
	recs    map[string][]byte
	nextPID int64
	fail    bool
}

func (s *memStore) SaveTxn(id string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("disk gone")
	}
	s.recs[id] = append([]byte(nil), v...)
	return nil
}

func (s *memStore) DeleteTxn(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("disk gone")
	}
	delete(s.recs, id)
	return nil
}

func (s *memStore) LoadTxns() (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.recs {
		out[k] = v
	}
	return out, nil
}

func (s *memStore) AllocateProducerID() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextPID++
	return s.nextPID, nil
}

type markerCall struct {
	pid   int64
	epoch int16
	kind  Marker
	parts []TopicPartition
}

// harness is a coordinator over memStore with recorded markers and offsets and a clock.
type harness struct {
	t       *testing.T
	store   *memStore
	c       *Coordinator
	mu      sync.Mutex
	markers []markerCall
	offsets map[string][]PendingOffset
	failMk  bool
	now     time.Time
}

func newHarness(t *testing.T, store *memStore) *harness {
	h := &harness{t: t, store: store, offsets: map[string][]PendingOffset{}, now: time.UnixMilli(1_000_000)}
	c, err := New(Config{
		Store: store,
		WriteMarkers: func(_ context.Context, pid int64, epoch int16, kind Marker, parts []TopicPartition) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.failMk {
				return errors.New("log stopped")
			}
			h.markers = append(h.markers, markerCall{pid, epoch, kind, append([]TopicPartition(nil), parts...)})
			return nil
		},
		CommitOffsets: func(group string, offsets []PendingOffset) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, o := range offsets {
				if o.At == 0 {
					t.Errorf("offset %+v applied without the time it was committed", o)
				}
				o.At = 0
				h.offsets[group] = append(h.offsets[group], o)
			}
			return nil
		},
		Now: func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now },
	})
	if err == nil {
		err = c.Load()
	}
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

func (h *harness) lastMarker() markerCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.markers) == 0 {
		h.t.Fatal("no markers written")
	}
	return h.markers[len(h.markers)-1]
}

func (h *harness) markerCount() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.markers) }

func want(t *testing.T, what string, got, exp int16) {
	t.Helper()
	if got != exp {
		t.Fatalf("%s: error %d, want %d", what, got, exp)
	}
}

var tp0, tp1 = TopicPartition{"a", 0}, TopicPartition{"b", 1}

func TestCommitWritesMarkersAndAppliesOffsets(t *testing.T) {
	h := newHarness(t, &memStore{recs: map[string][]byte{}})
	pid, epoch, code := h.c.InitProducerID("t1", 60000, -1, -1)
	want(t, "init", code, wire.ErrNone)
	if epoch != 0 {
		t.Fatalf("first epoch %d", epoch)
	}
	want(t, "end before begin", h.c.EndTxn("t1", pid, epoch, true), wire.ErrInvalidTxnState)
	want(t, "add", h.c.AddPartitions("t1", pid, epoch, []TopicPartition{tp0, tp1}), wire.ErrNone)
	if !h.c.Verify("t1", pid, epoch, "a", 0) || h.c.Verify("t1", pid, epoch, "a", 1) || h.c.Verify("t1", pid, epoch+1, "a", 0) || h.c.Verify("t2", pid, epoch, "a", 0) {
		t.Fatal("Verify disagrees with the partitions added")
	}
	want(t, "offsets before the group is added", h.c.CommitOffsets("t1", pid, epoch, "g", []PendingOffset{{Topic: "a", Offset: 5}}), wire.ErrInvalidTxnState)
	want(t, "add group", h.c.AddGroup("t1", pid, epoch, "g"), wire.ErrNone)
	want(t, "offsets", h.c.CommitOffsets("t1", pid, epoch, "g", []PendingOffset{{Topic: "a", Offset: 5}}), wire.ErrNone)
	want(t, "offsets again", h.c.CommitOffsets("t1", pid, epoch, "g", []PendingOffset{{Topic: "a", Offset: 7}}), wire.ErrNone)
	if !h.c.PendingOffset("g", "a", 0) || h.c.PendingOffset("g", "a", 1) {
		t.Fatal("pending offsets not reported")
	}
	if d, _ := h.c.Describe("t1"); d.State != Ongoing || d.StartMs != 1_000_000 || !reflect.DeepEqual(d.Partitions, []TopicPartition{tp0, tp1}) {
		t.Fatalf("described %+v", d)
	}
	want(t, "commit", h.c.EndTxn("t1", pid, epoch, true), wire.ErrNone)
	if m := h.lastMarker(); m.pid != pid || m.epoch != epoch || m.kind != CommitMarker || !reflect.DeepEqual(m.parts, []TopicPartition{tp0, tp1}) {
		t.Fatalf("markers %+v", m)
	}
	if got := h.offsets["g"]; !reflect.DeepEqual(got, []PendingOffset{{Topic: "a", Offset: 7}}) {
		t.Fatalf("offsets applied %+v", got)
	}
	if h.c.PendingOffset("g", "a", 0) || h.c.Verify("t1", pid, epoch, "a", 0) {
		t.Fatal("the committed transaction still pending")
	}
	want(t, "commit retried", h.c.EndTxn("t1", pid, epoch, true), wire.ErrNone)
	want(t, "abort after commit", h.c.EndTxn("t1", pid, epoch, false), wire.ErrInvalidTxnState)
	if h.markerCount() != 1 {
		t.Fatalf("a retried end wrote markers again")
	}

	// An abort drops the pending offsets.
	want(t, "add", h.c.AddPartitions("t1", pid, epoch, []TopicPartition{tp1}), wire.ErrNone)
	want(t, "add group", h.c.AddGroup("t1", pid, epoch, "g"), wire.ErrNone)
	want(t, "offsets", h.c.CommitOffsets("t1", pid, epoch, "g", []PendingOffset{{Topic: "a", Offset: 9}}), wire.ErrNone)
	want(t, "abort", h.c.EndTxn("t1", pid, epoch, false), wire.ErrNone)
	if m := h.lastMarker(); m.kind != AbortMarker || !reflect.DeepEqual(m.parts, []TopicPartition{tp1}) {
		t.Fatalf("abort markers %+v", m)
	}
	if got := h.offsets["g"]; len(got) != 1 {
		t.Fatalf("aborted offsets applied: %+v", got)
	}
}

func TestInitProducerIDFencesAndAbortsTheOpenTransaction(t *testing.T) {
	h := newHarness(t, &memStore{recs: map[string][]byte{}})
	_, _, code := h.c.InitProducerID("t1", 0, -1, -1)
	want(t, "zero timeout", code, wire.ErrInvalidTransactionTimeout)
	_, _, code = h.c.InitProducerID("t1", 15*60*1000+1, -1, -1)
	want(t, "timeout over the maximum", code, wire.ErrInvalidTransactionTimeout)

	pid, e0, _ := h.c.InitProducerID("t1", 60000, -1, -1)
	want(t, "add", h.c.AddPartitions("t1", pid, e0, []TopicPartition{tp0}), wire.ErrNone)
	pid2, e1, code := h.c.InitProducerID("t1", 60000, -1, -1)
	want(t, "second init", code, wire.ErrNone)
	// The open transaction was aborted at a bumped epoch (fencing the old producer's batches
	// on the partition), and the new producer got a further one.
	if m := h.lastMarker(); m.kind != AbortMarker || m.epoch != e0+1 || m.pid != pid {
		t.Fatalf("abort on re-init: %+v", m)
	}
	if pid2 != pid || e1 != e0+2 {
		t.Fatalf("re-init gave %d/%d, want %d/%d", pid2, e1, pid, e0+2)
	}
	// Its answer lost, the producer retries naming the epoch it had (KIP-360): the same
	// answer, not a fence.
	if p, e, code := h.c.InitProducerID("t1", 60000, pid, e0); code != wire.ErrNone || p != pid || e != e1 {
		t.Fatalf("retried re-init: %d/%d error %d, want %d/%d", p, e, code, pid, e1)
	}
	want(t, "old epoch adds", h.c.AddPartitions("t1", pid, e0, []TopicPartition{tp0}), wire.ErrProducerFenced)
	want(t, "old epoch ends", h.c.EndTxn("t1", pid, e0, true), wire.ErrProducerFenced)
	want(t, "old epoch commits offsets", h.c.CommitOffsets("t1", pid, e0, "g", nil), wire.ErrInvalidProducerEpoch)
	want(t, "wrong producer id", h.c.AddPartitions("t1", pid+100, e1, []TopicPartition{tp0}), wire.ErrInvalidProducerIDMapping)
	want(t, "unknown id", h.c.EndTxn("nope", pid, e1, true), wire.ErrInvalidProducerIDMapping)

	// KIP-360: naming the current id and epoch bumps; a retry naming the previous ones gets
	// the current ones back; anything else is fenced.
	_, e2, code := h.c.InitProducerID("t1", 60000, pid, e1)
	want(t, "init with the current epoch", code, wire.ErrNone)
	if e2 != e1+1 {
		t.Fatalf("epoch %d after %d", e2, e1)
	}
	if _, e, code := h.c.InitProducerID("t1", 60000, pid, e1); code != wire.ErrNone || e != e2 {
		t.Fatalf("retried init: epoch %d error %d", e, code)
	}
	_, _, code = h.c.InitProducerID("t1", 60000, pid, e0)
	want(t, "init with a stale epoch", code, wire.ErrProducerFenced)
}

func TestEpochExhaustionMovesToANewProducerID(t *testing.T) {
	store := &memStore{recs: map[string][]byte{}}
	r := record{ProducerID: 7, Epoch: math.MaxInt16 - 1, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 1000, State: CompleteCommit, StartMs: -1}
	v, _ := json.Marshal(r)
	store.recs["t1"], store.nextPID = v, 7
	h := newHarness(t, store)
	pid, epoch, code := h.c.InitProducerID("t1", 60000, -1, -1)
	want(t, "init", code, wire.ErrNone)
	if pid == 7 || epoch != 0 {
		t.Fatalf("exhausted epoch gave %d/%d", pid, epoch)
	}
	if h.c.Verify("t1", 7, math.MaxInt16-1, "a", 0) {
		t.Fatal("the old producer id still verifies")
	}
}

func TestTimeoutAbortsAndFences(t *testing.T) {
	h := newHarness(t, &memStore{recs: map[string][]byte{}})
	pid, epoch, _ := h.c.InitProducerID("t1", 1000, -1, -1)
	want(t, "add", h.c.AddPartitions("t1", pid, epoch, []TopicPartition{tp0}), wire.ErrNone)
	h.c.sweep()
	if h.markerCount() != 0 {
		t.Fatal("aborted before its timeout")
	}
	h.mu.Lock()
	h.now = h.now.Add(1001 * time.Millisecond)
	h.mu.Unlock()
	h.c.sweep()
	if m := h.lastMarker(); m.kind != AbortMarker || m.epoch != epoch+1 {
		t.Fatalf("timeout abort %+v", m)
	}
	want(t, "commit after the timeout", h.c.EndTxn("t1", pid, epoch, true), wire.ErrProducerFenced)
	if d, _ := h.c.Describe("t1"); d.State != CompleteAbort || d.Epoch != epoch+1 {
		t.Fatalf("after the timeout: %+v", d)
	}
}

// TestPreparedTransactionsCompleteAfterFailureAndRestart: once PrepareCommit is durable the
// commit happens, whether the markers failed (retried by the sweep) or the node stopped
// (completed at start).
func TestPreparedTransactionsCompleteAfterFailureAndRestart(t *testing.T) {
	store := &memStore{recs: map[string][]byte{}}
	h := newHarness(t, store)
	pid, epoch, _ := h.c.InitProducerID("t1", 60000, -1, -1)
	want(t, "add", h.c.AddPartitions("t1", pid, epoch, []TopicPartition{tp0}), wire.ErrNone)
	want(t, "add group", h.c.AddGroup("t1", pid, epoch, "g"), wire.ErrNone)
	want(t, "offsets", h.c.CommitOffsets("t1", pid, epoch, "g", []PendingOffset{{Topic: "a", Offset: 3}}), wire.ErrNone)
	h.failMk = true
	want(t, "commit with the log down", h.c.EndTxn("t1", pid, epoch, true), wire.ErrNone)
	if d, _ := h.c.Describe("t1"); d.State != PrepareCommit {
		t.Fatalf("state %v", d.State)
	}
	want(t, "begin while completing", h.c.AddPartitions("t1", pid, epoch, []TopicPartition{tp0}), wire.ErrConcurrentTransactions)
	_, _, code := h.c.InitProducerID("t1", 60000, -1, -1)
	want(t, "init while completing", code, wire.ErrConcurrentTransactions)
	if len(h.offsets["g"]) != 0 {
		t.Fatal("offsets applied before the markers")
	}

	// A restart: the new coordinator completes the commit when it starts.
	h2 := newHarness(t, store)
	h2.c.Start()
	defer h2.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d, _ := h2.c.Describe("t1"); d.State == CompleteCommit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("prepared commit not completed after a restart")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := h2.lastMarker(); m.kind != CommitMarker || m.pid != pid {
		t.Fatalf("markers after restart %+v", m)
	}
	if got := h2.offsets["g"]; !reflect.DeepEqual(got, []PendingOffset{{Topic: "a", Offset: 3}}) {
		t.Fatalf("offsets after restart %+v", got)
	}
}

func TestSaveFailureAnswersCoordinatorNotAvailable(t *testing.T) {
	store := &memStore{recs: map[string][]byte{}}
	h := newHarness(t, store)
	pid, epoch, _ := h.c.InitProducerID("t1", 60000, -1, -1)
	store.fail = true
	want(t, "add", h.c.AddPartitions("t1", pid, epoch, []TopicPartition{tp0}), wire.ErrCoordinatorNotAvailable)
	if h.c.Verify("t1", pid, epoch, "a", 0) {
		t.Fatal("a partition whose addition was not saved verifies")
	}
}

func TestListAndDescribe(t *testing.T) {
	h := newHarness(t, &memStore{recs: map[string][]byte{}})
	h.c.InitProducerID("b", 60000, -1, -1)
	pid, epoch, _ := h.c.InitProducerID("a", 60000, -1, -1)
	h.c.AddPartitions("a", pid, epoch, []TopicPartition{tp0})
	l := h.c.List()
	if len(l) != 2 || l[0].ID != "a" || l[0].State != Ongoing || l[1].ID != "b" || l[1].State != Empty {
		t.Fatalf("list %+v", l)
	}
	if _, ok := h.c.Describe("none"); ok {
		t.Fatal("an unknown id described")
	}
}
