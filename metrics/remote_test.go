package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"inlet/tier"
)

type stubRemote struct{ s tier.Stats }

func (r *stubRemote) Stats() tier.Stats { return r.s }

// TestReadyzSaysTheRemoteTierIsBehind: /readyz stays 200 while the remote tier fails (produce
// goes on) and says why in its body; the gauges follow the tier's state.
func TestReadyzSaysTheRemoteTierIsBehind(t *testing.T) {
	m := New([]int16{0}, "test", "")
	r := &stubRemote{s: tier.Stats{Healthy: true, LagBytes: 10}}
	m.WatchRemote(r)
	m.SetReady(true)
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		m.Handler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != 200 || body != "ready\n" {
		t.Fatalf("healthy tier: %d %q", code, body)
	}
	r.s = tier.Stats{Healthy: false, LastError: "put x: 503 Service Unavailable", LagBytes: 4096}
	if code, body := get(); code != 200 || !strings.Contains(body, "remote tier behind: put x: 503") {
		t.Fatalf("failing tier: %d %q", code, body)
	}
	rec := httptest.NewRecorder()
	m.Handler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{"inlet_remote_healthy 0", "inlet_remote_upload_lag_bytes 4096"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
