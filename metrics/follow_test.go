package metrics

import (
	"testing"
	"time"

	"inlet/diskless/follow"
	"inlet/tier"
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

type stubRecords struct{ s tier.RecordCacheStats }

func (r *stubRecords) Stats() tier.RecordCacheStats { return r.s }

// TestStandbyTierRecordsFollowsTheCache: the gauge reads the records held at each scrape.
func TestStandbyTierRecordsFollowsTheCache(t *testing.T) {
	m := New([]int16{0}, "test", "")
	r := &stubRecords{s: tier.RecordCacheStats{Records: 1240, Read: 1300}}
	m.WatchRecordCache(r)
	if got := scrape(t, m, "inlet_standby_tier_records")["inlet_standby_tier_records"]; got != 1240 {
		t.Fatalf("inlet_standby_tier_records = %v, want 1240", got)
	}
	r.s.Records = 3 // objects deleted from the bucket
	if got := scrape(t, m, "inlet_standby_tier_records")["inlet_standby_tier_records"]; got != 3 {
		t.Fatalf("after deletes inlet_standby_tier_records = %v, want 3", got)
	}
}
