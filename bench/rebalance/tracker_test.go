package rebalance

import (
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

// assignAll gives member the partitions ps at now and has each deliver a record produced at
// produced, polled at now.
func assignAll(tr *Tracker, member string, ps []int32, now, produced time.Duration) {
	tr.Assigned(member, ps, now)
	for _, p := range ps {
		tr.Delivered(member, p, produced, now)
	}
}

// TestTrackerMovedPartitionCountsAtItsNewOwner: the rebalance ends at the first record
// produced after the join that the new owner of a moved partition polls; records of the
// partition the old owner still polls, records produced before the join, and the new owner's
// records before its assignment do not end it.
func TestTrackerMovedPartitionCountsAtItsNewOwner(t *testing.T) {
	tr := NewTracker(4)
	tr.Begin(0)
	assignAll(tr, "a", []int32{0, 1}, 10*ms, 10*ms)
	assignAll(tr, "b", []int32{2, 3}, 10*ms, 10*ms)
	if d, ok := tr.Settled(2); !ok || d != 10*ms {
		t.Fatalf("two members settled: %v %t, want 10ms true", d, ok)
	}
	join := 1000 * ms
	tr.Begin(join)
	if _, ok := tr.Settled(2); ok {
		t.Fatal("settled at the join, before any record produced after it was polled")
	}
	for _, p := range []int32{0, 1} {
		tr.Delivered("a", p, join+5*ms, join+10*ms)
	}
	for _, p := range []int32{2, 3} {
		tr.Delivered("b", p, join+5*ms, join+10*ms)
	}
	if _, ok := tr.Settled(3); ok {
		t.Fatal("settled over three members while c owns nothing")
	}
	tr.Delivered("c", 3, join+20*ms, join+30*ms) // not c's yet
	tr.Revoked("b", []int32{3}, join+2000*ms, "revoked")
	tr.Delivered("b", 3, join+2000*ms, join+2001*ms) // b no longer owns it
	tr.Assigned("c", []int32{3}, join+2500*ms)
	tr.Delivered("c", 3, join-1*ms, join+2510*ms) // produced before the join
	if _, ok := tr.Settled(3); ok {
		t.Fatal("settled before c polled a record produced after the join")
	}
	tr.Delivered("c", 3, join+2400*ms, join+2520*ms)
	tr.Delivered("c", 3, join+2500*ms, join+2600*ms) // later records do not move it
	d, ok := tr.Settled(3)
	if !ok || d != 2520*ms {
		t.Fatalf("settled: %v %t, want 2.52s true", d, ok)
	}
	var whats []string
	for _, e := range tr.Events() {
		if e.At >= join {
			whats = append(whats, e.Member+" "+e.What)
		}
	}
	want := []string{"a first", "a first", "b first", "b revoked", "c assigned", "c first"} // b's first of 3 went with it
	if len(whats) != len(want) {
		t.Fatalf("events after the join: %v, want %v", whats, want)
	}
	for i := range want {
		if whats[i] != want[i] {
			t.Fatalf("events after the join: %v, want %v", whats, want)
		}
	}
}

// TestTrackerNotSettledWhileOwnedTwiceOrUnbalanced: a partition both members' clients say
// they own, a partition nobody owns, and an unbalanced split are not settled.
func TestTrackerNotSettledWhileOwnedTwiceOrUnbalanced(t *testing.T) {
	tr := NewTracker(4)
	tr.Begin(0)
	assignAll(tr, "a", []int32{0, 1, 2}, ms, ms)
	assignAll(tr, "b", []int32{2, 3}, 2*ms, 2*ms)
	if _, ok := tr.Settled(2); ok {
		t.Fatal("settled while partition 2 is owned twice")
	}
	tr.Revoked("a", []int32{2}, 3*ms, "revoked")
	if d, ok := tr.Settled(2); !ok || d != 2*ms {
		t.Fatalf("after a gave 2 up: %v %t, want 2ms true", d, ok)
	}
	tr.Revoked("b", []int32{3}, 4*ms, "lost")
	if _, ok := tr.Settled(2); ok {
		t.Fatal("settled while partition 3 has no owner")
	}
	assignAll(tr, "a", []int32{3}, 5*ms, 5*ms)
	if _, ok := tr.Settled(2); ok {
		t.Fatal("settled with a 3-1 split (the assignors balance to within one)")
	}
	if o := tr.Owned(); len(o["a"]) != 3 || len(o["b"]) != 1 {
		t.Fatalf("owned: %v", o)
	}
}

func TestSummarizeMedianWorstAndFailures(t *testing.T) {
	rs := []Result{
		{Target: "inlet", Protocol: Consumer, Outcome: Outcome{Seconds: 3}},
		{Target: "inlet", Protocol: Consumer, Outcome: Outcome{Seconds: 1}},
		{Target: "inlet", Protocol: Consumer, Outcome: Outcome{Seconds: 2}},
		{Target: "inlet", Protocol: Consumer, Outcome: Outcome{Seconds: 10}},
		{Target: "inlet", Protocol: Consumer, Outcome: Outcome{Seconds: math.NaN()}},
		{Target: "kfake", Protocol: Classic, Outcome: Outcome{Seconds: math.NaN()}},
	}
	cells := Summarize(rs)
	if c := cells[[2]string{"inlet", Consumer}]; c.Median != 2.5 || c.Worst != 10 || c.Runs != 5 || c.Failed != 1 {
		t.Fatalf("inlet consumer: %+v, want median 2.5, worst 10, 5 runs, 1 failed", c)
	}
	if c := cells[[2]string{"kfake", Classic}]; !math.IsNaN(c.Median) || c.Failed != 1 {
		t.Fatalf("kfake classic: %+v, want no figure and 1 failed", c)
	}
}
