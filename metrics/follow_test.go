package metrics

import (
	"testing"
	"time"

	"inlet/diskless/follow"
)

type stubFollower struct{ s follow.Stats }

func (f *stubFollower) Stats() follow.Stats { return f.s }

// TestStandbyLagFollowsTheFollower: the lag gauges and the fetched counter read the
// follower's stats at each scrape.
func TestStandbyLagFollowsTheFollower(t *testing.T) {
	m := New([]int16{0}, "test", "")
	f := &stubFollower{s: follow.Stats{LagObjects: 3, LagBytes: 3000, Behind: 1500 * time.Millisecond, FetchedBytes: 7000}}
	m.WatchFollower(f)
	names := []string{"inlet_standby_lag_objects", "inlet_standby_lag_bytes", "inlet_standby_lag_seconds", "inlet_standby_fetched_bytes_total"}
	got := scrape(t, m, names...)
	for i, want := range []float64{3, 3000, 1.5, 7000} {
		if got[names[i]] != want {
			t.Errorf("%s = %v, want %v", names[i], got[names[i]], want)
		}
	}
	f.s = follow.Stats{FetchedBytes: 9000} // caught up
	got = scrape(t, m, names...)
	for i, want := range []float64{0, 0, 0, 9000} {
		if got[names[i]] != want {
			t.Errorf("caught up: %s = %v, want %v", names[i], got[names[i]], want)
		}
	}
}
