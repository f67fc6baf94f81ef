package conn

import (
	"fmt"
	"testing"
	"time"
)

func TestAttemptBucketsAllowABurstThenRefuse(t *testing.T) {
	var a attemptBuckets
	now := time.Unix(1000, 0)
	for i := range plainAttemptBurst {
		if !a.take("10.0.0.1", now) {
			t.Fatalf("attempt %d of the burst refused", i)
		}
	}
	if a.take("10.0.0.1", now) {
		t.Fatal("an attempt past the burst allowed")
	}
	// Another address has its own bucket.
	if !a.take("10.0.0.2", now) {
		t.Fatal("a second address refused")
	}
	// One token back per plainAttemptRefill, never more than the burst.
	if !a.take("10.0.0.1", now.Add(plainAttemptRefill)) || a.take("10.0.0.1", now.Add(plainAttemptRefill)) {
		t.Fatal("want exactly one attempt after one refill interval")
	}
	later := now.Add(1000 * plainAttemptRefill)
	for i := range plainAttemptBurst {
		if !a.take("10.0.0.1", later) {
			t.Fatalf("attempt %d after a long pause refused", i)
		}
	}
	if a.take("10.0.0.1", later) {
		t.Fatal("a long pause saved up more than the burst")
	}
}

func TestAttemptBucketsGiveBackASuccess(t *testing.T) {
	var a attemptBuckets
	now := time.Unix(1000, 0)
	for range 100 * plainAttemptBurst {
		if !a.take("10.0.0.1", now) {
			t.Fatal("refused although every attempt gave its token back")
		}
		a.give("10.0.0.1", now)
	}
	a.give("10.0.0.1", now) // a give without a take never raises it past the burst
	for range plainAttemptBurst {
		a.take("10.0.0.1", now)
	}
	if a.take("10.0.0.1", now) {
		t.Fatal("bucket holds more than the burst")
	}
}

// TestAttemptBucketsAreBounded: the table never holds more than maxAttemptBuckets addresses;
// full buckets are dropped first, and past that new addresses share one bucket.
func TestAttemptBucketsAreBounded(t *testing.T) {
	var a attemptBuckets
	now := time.Unix(1000, 0)
	for i := range maxAttemptBuckets {
		for range plainAttemptBurst {
			a.take(fmt.Sprint(i), now)
		}
	}
	if len(a.m) != maxAttemptBuckets {
		t.Fatalf("%d buckets, want %d", len(a.m), maxAttemptBuckets)
	}
	// Every bucket is empty: newcomers share the overflow bucket, so its burst is all they get.
	for i := range plainAttemptBurst {
		if !a.take(fmt.Sprint("new", i), now) {
			t.Fatalf("newcomer %d refused within the shared burst", i)
		}
	}
	if a.take("one more", now) {
		t.Fatal("newcomers past the shared bucket's burst allowed")
	}
	if len(a.m) > maxAttemptBuckets {
		t.Fatalf("%d buckets, want at most %d", len(a.m), maxAttemptBuckets)
	}
	// Once the old buckets have refilled, they are dropped to make room.
	later := now.Add(plainAttemptBurst * plainAttemptRefill)
	if !a.take("newcomer after refill", later) {
		t.Fatal("newcomer refused after the table's buckets refilled")
	}
	if _, ok := a.m["newcomer after refill"]; !ok || len(a.m) > maxAttemptBuckets {
		t.Fatalf("newcomer has no bucket of its own (%d buckets)", len(a.m))
	}
}
