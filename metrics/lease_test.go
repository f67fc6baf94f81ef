package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestReadyzOnAStandby: a standby's /readyz is 503 and names the writer, inlet_bucket_writer
// is 0; once it took over and serves, /readyz is 200 and the takeover is counted with its
// duration.
func TestReadyzOnAStandby(t *testing.T) {
	m := New([]int16{0}, "test", "")
	m.StandingBy(func() string { return "the writer is node 1 at 10.0.0.1:9092" })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		m.Handler(false).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "standby: the writer is node 1 at 10.0.0.1:9092") {
		t.Fatalf("standby: %d %q", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{"inlet_bucket_writer 0", "inlet_takeovers_total 0", "inlet_takeover_duration_seconds 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("standing by: /metrics lacks %q", want)
		}
	}
	m.WatchLease(&stubLease{s: lease.State{Epoch: 2, Writer: true}})
	m.TookOver(1500 * time.Millisecond)
	m.SetReady(true)
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("after the takeover: %d %q", code, body)
	}
	_, metrics = get("/metrics")
	for _, want := range []string{"inlet_bucket_writer 1", "inlet_bucket_lease_epoch 2", "inlet_takeovers_total 1", "inlet_takeover_duration_seconds 1.5"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("after the takeover: /metrics lacks %q", want)
		}
	}
}
