package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"inlet/lease"
)

type stubLease struct{ s lease.State }

func (l *stubLease) State() lease.State { return l.s }

// TestReadyzFailsWhileNotTheWriter: /readyz is 503 while the node does not hold its bucket
// prefix's lease, naming the node that took it; the gauges follow.
func TestReadyzFailsWhileNotTheWriter(t *testing.T) {
	m := New([]int16{0}, "test", "")
	l := &stubLease{s: lease.State{Epoch: 1, Writer: true}}
	m.WatchLease(l)
	m.SetReady(true)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		m.Handler(false).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("writer: %d %q", code, body)
	}
	l.s = lease.State{Epoch: 1}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "bucket lease not held") {
		t.Fatalf("lease lapsed: %d %q", code, body)
	}
	l.s = lease.State{Epoch: 1, Fenced: true, FencedBy: lease.Record{Node: "node 2", Epoch: 2}}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "fenced: prefix taken by node 2 epoch 2") {
		t.Fatalf("fenced: %d %q", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{"inlet_bucket_lease_epoch 1", "inlet_bucket_writer 0", "inlet_bucket_fenced_total 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
