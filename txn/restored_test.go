package txn

import (
	"encoding/json"
	"testing"
	"time"

	"inlet/wire"
)

// TestRestoredAbortsOnlyTransactionsTheNodeDoesNotHoldOpen: a record brought back from
// elsewhere with an Ongoing transaction becomes PrepareAbort at a bumped epoch unless the
// node's own record holds that transaction open; the coordinator then aborts it at start.
func TestRestoredAbortsOnlyTransactionsTheNodeDoesNotHoldOpen(t *testing.T) {
	enc := func(r record) []byte { b, _ := json.Marshal(r); return b }
	open := record{ProducerID: 7, Epoch: 3, State: Ongoing, StartMs: 100, Partitions: []TopicPartition{tp0}}
	decode := func(v []byte) record {
		var r record
		if err := json.Unmarshal(v, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		v     record
		held  []byte
		state State
		epoch int16
	}{
		{"open, the node has none", open, nil, PrepareAbort, 4},
		{"open, the node holds it open", open, enc(open), Ongoing, 3},
		{"open, the node holds an older transaction", open, enc(record{ProducerID: 7, Epoch: 3, State: Ongoing, StartMs: 50}), PrepareAbort, 4},
		{"open, the node holds it ended", open, enc(record{ProducerID: 7, Epoch: 3, State: CompleteAbort, StartMs: -1}), PrepareAbort, 4},
		{"prepared commit", record{ProducerID: 7, Epoch: 3, State: PrepareCommit}, nil, PrepareCommit, 3},
		{"complete", record{ProducerID: 7, Epoch: 3, State: CompleteCommit}, nil, CompleteCommit, 3},
	} {
		out, pid, err := Restored(enc(tc.v), tc.held)
		r := decode(out)
		if err != nil || pid != 7 || r.State != tc.state || r.Epoch != tc.epoch {
			t.Errorf("%s: %+v pid %d %v", tc.name, r, pid, err)
		}
	}
	if _, _, err := Restored([]byte("{"), nil); err == nil {
		t.Error("a record that does not decode was taken")
	}

	// The coordinator aborts what Restored made PrepareAbort, at the bumped epoch, when it starts.
	store := &memStore{recs: map[string][]byte{}}
	out, _, _ := Restored(enc(open), nil)
	store.recs["t1"] = out
	h := newHarness(t, store)
	want(t, "the old producer's end", h.c.EndTxn("t1", 7, 3, true), wire.ErrProducerFenced)
	h.c.Start()
	defer h.c.Close()
	waitFor(t, func() bool { d, _ := h.c.Describe("t1"); return d.State == CompleteAbort })
	if m := h.lastMarker(); m.kind != AbortMarker || m.pid != 7 || m.epoch != 4 {
		t.Fatalf("marker %+v", m)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
