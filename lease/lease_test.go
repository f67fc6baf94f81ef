package lease

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"inlet/objstore"
)

// fakeClock is a monotonic clock that moves only when told to, or by the time a Sleep asks for.
type fakeClock struct {
	mu  sync.Mutex
	now time.Duration
}

func (c *fakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.advance(d)
	return nil
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

const d = 10 * time.Second

var errInjected = errors.New("injected")

// held takes the lease on m with its own fake clock and no renewal loop (the test renews).
func held(t *testing.T, m objstore.Bucket, node string) (*Lease, *fakeClock) {
	t.Helper()
	c := &fakeClock{}
	l, err := take(context.Background(), Config{Bucket: m, Node: node, Duration: d, Clock: c})
	if err != nil {
		t.Fatalf("take by %s: %v", node, err)
	}
	return l, c
}

func stored(t *testing.T, m *objstore.Memory) Record {
	t.Helper()
	b, ok := m.Object(Key)
	if !ok {
		t.Fatal("no lease object")
	}
	r, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTakeOfAnEmptyPrefixIsEpochOne(t *testing.T) {
	m := objstore.NewMemory()
	l, _ := held(t, m, "a")
	if l.Epoch() != 1 || !l.Writable() {
		t.Fatalf("epoch %d writable %v, want 1 and true", l.Epoch(), l.Writable())
	}
	if r := stored(t, m); r.Node != "a" || r.Epoch != 1 || r.DurationMs != d.Milliseconds() || r.Incarnation != l.rec.Incarnation {
		t.Fatalf("stored %+v", r)
	}
}

// A holder paused past its lease knows on resume, before any renewal, that it may not
// acknowledge; a renewal on its ETag makes it the writer again when no one took the prefix.
func TestWritableOnlyUntilRenewalPlusDurationMinusMargin(t *testing.T) {
	m := objstore.NewMemory()
	l, c := held(t, m, "a")
	c.advance(d - d/5 - time.Millisecond)
	if !l.Writable() {
		t.Fatal("not writable inside the lease")
	}
	c.advance(time.Millisecond)
	if l.Writable() || l.Remaining() != 0 {
		t.Fatalf("writable %v (remaining %v) at duration - margin after the take", l.Writable(), l.Remaining())
	}
	if err := l.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !l.Writable() || l.Remaining() != d-d/5 || l.State().Renewals != 1 || stored(t, m).Renewals != 1 {
		t.Fatalf("after a renewal: writable %v remaining %v state %+v", l.Writable(), l.Remaining(), l.State())
	}
}

func TestTakeAfterExpiryFencesTheOldHolder(t *testing.T) {
	m := objstore.NewMemory()
	a, _ := held(t, m, "a")
	b, cb := held(t, m, "b") // waits, polling on its own clock, which its sleeps advance
	if b.Epoch() != 2 {
		t.Fatalf("taker's epoch %d, want 2", b.Epoch())
	}
	if cb.Now() < d {
		t.Fatalf("taken after %v of watching, want at least the holder's duration %v", cb.Now(), d)
	}
	if !b.Writable() {
		t.Fatal("the taker is not writable")
	}
	// a (not paused on its clock here) learns at its next renewal.
	select {
	case <-a.Fenced():
		t.Fatal("fenced before renewing")
	default:
	}
	if err := a.renew(context.Background()); err != errFenced {
		t.Fatalf("old holder's renewal: %v, want errFenced", err)
	}
	<-a.Fenced()
	st := a.State()
	if a.Writable() || !st.Fenced || st.FencedBy.Epoch != 2 || st.FencedBy.Node != "b" {
		t.Fatalf("old holder's state %+v", st)
	}
	if got := st.NotWritableReason(); got != "fenced: prefix taken by b epoch 2" {
		t.Fatalf("reason %q", got)
	}
	// For good: the next renewal does not even try.
	calls := m.Calls(objstore.OpPutIf)
	if err := a.renew(context.Background()); err != errFenced || m.Calls(objstore.OpPutIf) != calls {
		t.Fatalf("renewal after fencing: %v, %d writes", err, m.Calls(objstore.OpPutIf)-calls)
	}
	if r := stored(t, m); r.Node != "b" || r.Epoch != 2 {
		t.Fatalf("stored %+v", r)
	}
	// Close of a fenced lease writes nothing.
	if err := a.Close(context.Background()); err != nil || m.Calls(objstore.OpPutIf) != calls {
		t.Fatalf("Close of a fenced lease: %v, %d writes", err, m.Calls(objstore.OpPutIf)-calls)
	}
}

func TestReleasedLeaseIsTakenAtOnce(t *testing.T) {
	m := objstore.NewMemory()
	a, err := Take(context.Background(), Config{Bucket: m, Node: "a", Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Writable() || !stored(t, m).Released {
		t.Fatalf("after Close: writable %v, stored %+v", a.Writable(), stored(t, m))
	}
	b, cb := held(t, m, "b")
	if b.Epoch() != 2 || cb.Now() != 0 {
		t.Fatalf("taker of a released lease: epoch %d after waiting %v; want 2 at once", b.Epoch(), cb.Now())
	}
}

// A take whose reply was lost is found by reading the lease back: this incarnation's.
func TestLostReplyOnTakeIsReadBack(t *testing.T) {
	m := objstore.NewMemory()
	m.LoseNextReply(objstore.OpPutIf, 1, errInjected)
	l, _ := held(t, m, "a")
	if l.Epoch() != 1 || !l.Writable() || m.Calls(objstore.OpPutIf) != 1 {
		t.Fatalf("epoch %d writable %v after %d writes", l.Epoch(), l.Writable(), m.Calls(objstore.OpPutIf))
	}
	// Same on a take of a released lease.
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.LoseNextReply(objstore.OpPutIf, 1, errInjected)
	b, _ := held(t, m, "b")
	if b.Epoch() != 2 || !b.Writable() {
		t.Fatalf("epoch %d writable %v", b.Epoch(), b.Writable())
	}
}

// A renewal whose reply was lost is confirmed by the next one (412, read back: its own), and
// counts from the start of the lost one, not the later.
func TestLostReplyOnRenewIsNotFencing(t *testing.T) {
	m := objstore.NewMemory()
	l, c := held(t, m, "a")
	c.advance(d / 2)
	m.LoseNextReply(objstore.OpPutIf, 1, errInjected)
	if err := l.renew(context.Background()); !errors.Is(err, errInjected) {
		t.Fatalf("renewal with its reply lost: %v", err)
	}
	c.advance(d / 10)
	if err := l.renew(context.Background()); err != nil {
		t.Fatalf("the next renewal: %v", err)
	}
	if l.State().Fenced {
		t.Fatal("fenced by its own renewal")
	}
	// Counted from d/2 (the lost one's start): writable until d/2 + d - d/5.
	if got, want := l.Remaining(), d/2+d-d/5-c.Now(); got != want {
		t.Fatalf("remaining %v, want %v", got, want)
	}
	// The lease object is this incarnation's, and the ETag adopted is current: renewing works.
	if err := l.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := stored(t, m); r.Incarnation != l.rec.Incarnation || r.Renewals != 2 {
		t.Fatalf("stored %+v", r)
	}
}

// A bucket that fails renewals leaves the holder unfenced but not writable once the lease
// runs out; the next renewal that lands makes it the writer again.
func TestFailingRenewalsLapseWithoutFencing(t *testing.T) {
	m := objstore.NewMemory()
	l, c := held(t, m, "a")
	m.SetDown(errInjected)
	for range 5 {
		c.advance(d / 5)
		if err := l.renew(context.Background()); !errors.Is(err, errInjected) {
			t.Fatalf("renewal with the bucket down: %v", err)
		}
	}
	if l.Writable() || l.State().Fenced {
		t.Fatalf("writable %v fenced %v after a lease duration of failed renewals", l.Writable(), l.State().Fenced)
	}
	m.SetDown(nil)
	if err := l.renew(context.Background()); err != nil || !l.Writable() {
		t.Fatalf("renewal after the bucket is back: %v, writable %v", err, l.Writable())
	}
}

// A renewal answered 412 by another node's record fences at once.
func TestPreconditionFailedByAnotherFences(t *testing.T) {
	m := objstore.NewMemory()
	l, _ := held(t, m, "a")
	other := []byte(`{"node":"x","incarnation":"ff","epoch":7,"duration_ms":1000}`)
	m.Delete(context.Background(), Key)
	if err := m.Put(context.Background(), Key, bytes.NewReader(other), int64(len(other))); err != nil {
		t.Fatal(err)
	}
	if err := l.renew(context.Background()); err != errFenced {
		t.Fatalf("renewal: %v, want errFenced", err)
	}
	if st := l.State(); st.FencedBy.Epoch != 7 || l.Writable() {
		t.Fatalf("state %+v", st)
	}
}

// A live holder renews while the second node watches: the second refuses, naming it.
func TestLiveHolderMakesTheTakerRefuse(t *testing.T) {
	m := objstore.NewMemory()
	const short = 300 * time.Millisecond
	a, err := Take(context.Background(), Config{Bucket: m, Node: "node a", Duration: short})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	start := time.Now()
	_, err = Take(context.Background(), Config{Bucket: m, Node: "node b", Duration: short})
	var he *HeldError
	if !errors.As(err, &he) || he.Holder.Node != "node a" || he.Holder.Epoch != 1 {
		t.Fatalf("Take beside a live holder: %v, want a HeldError naming node a", err)
	}
	if took := time.Since(start); took >= short {
		t.Fatalf("refused after %v, want within one duration (%v)", took, short)
	}
	if !a.Writable() {
		t.Fatal("the holder lost its lease")
	}
}

// Two nodes started at once on an empty prefix: one holds it, the other refuses.
func TestTwoTakesAtOnceOneRefuses(t *testing.T) {
	m := objstore.NewMemory()
	const short = 300 * time.Millisecond
	var wg sync.WaitGroup
	var leases [2]*Lease
	var errs [2]error
	for i := range 2 {
		wg.Go(func() {
			leases[i], errs[i] = Take(context.Background(), Config{Bucket: m, Node: string(rune('a' + i)), Duration: short})
		})
	}
	wg.Wait()
	held := 0
	for i := range 2 {
		var he *HeldError
		switch {
		case errs[i] == nil:
			held++
			defer leases[i].Close(context.Background())
		case !errors.As(errs[i], &he):
			t.Fatalf("take %d: %v", i, errs[i])
		}
	}
	if held != 1 {
		t.Fatalf("%d nodes hold the lease, want 1 (errors %v)", held, errs)
	}
}

// The renewal loop keeps a real holder writable across several durations.
func TestRenewalLoopKeepsTheLease(t *testing.T) {
	m := objstore.NewMemory()
	const short = 150 * time.Millisecond
	l, err := Take(context.Background(), Config{Bucket: m, Node: "a", Duration: short})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * short); time.Now().Before(deadline); time.Sleep(short / 10) {
		if !l.Writable() {
			t.Fatalf("not writable after %d renewals", l.State().Renewals)
		}
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := stored(t, m); !r.Released || r.Renewals < 5 {
		t.Fatalf("stored %+v, want released after at least 5 renewals", r)
	}
}

func TestNotALeaseIsRefused(t *testing.T) {
	m := objstore.NewMemory()
	junk := []byte("not json")
	if err := m.Put(context.Background(), Key, bytes.NewReader(junk), int64(len(junk))); err != nil {
		t.Fatal(err)
	}
	if _, err := take(context.Background(), Config{Bucket: m, Duration: d, Clock: &fakeClock{}}); err == nil {
		t.Fatal("took a prefix whose lease object does not decode")
	}
}

// A bucket that fails at start is retried until it answers.
func TestTakeRetriesAFailingBucket(t *testing.T) {
	m := objstore.NewMemory()
	m.FailNext(objstore.OpGet, 3, errInjected)
	l, _ := held(t, m, "a")
	if l.Epoch() != 1 || m.Calls(objstore.OpGet) != 4 {
		t.Fatalf("epoch %d after %d reads, want 1 after 4", l.Epoch(), m.Calls(objstore.OpGet))
	}
	// Take gives up when its context does.
	m2 := objstore.NewMemory()
	m2.SetDown(errInjected)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := take(ctx, Config{Bucket: m2, Duration: d, Clock: &fakeClock{}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("take with its context done: %v", err)
	}
}

// TestFailingRenewalsAreRetriedAtATenthOfTheDuration: with the bucket down, the renewal loop
// tries again every Duration/10, not back to back (each try past the due time would
// otherwise start the next at once, a call storm on a bucket that fails fast), and the first
// renewal that lands after it is back makes the holder the writer again.
func TestFailingRenewalsAreRetriedAtATenthOfTheDuration(t *testing.T) {
	m := objstore.NewMemory()
	const short = 200 * time.Millisecond
	l, err := Take(context.Background(), Config{Bucket: m, Node: "a", Duration: short})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	m.SetDown(errInjected)
	before := m.Calls(objstore.OpPutIf)
	time.Sleep(5 * short)
	// 1 s down: the due renewal and then one every 20 ms at most, 51 tries; a loop with
	// no wait makes thousands.
	if tries := m.Calls(objstore.OpPutIf) - before; tries > 5*10+5 {
		t.Fatalf("%d renewals tried in five durations with the bucket down, want one per tenth of the duration at most", tries)
	}
	m.SetDown(nil)
	deadline := time.Now().Add(5 * short)
	for !l.Writable() {
		if time.Now().After(deadline) {
			t.Fatal("not the writer again within five durations of the bucket coming back")
		}
		time.Sleep(short / 20)
	}
}

// TestStandbyWaitsForALiveHolder: with Wait, a taker beside a holder that renews waits, for
// as long as the holder renews, and takes the prefix once the holder releases it (at its next
// poll, within a second), or once the holder has stopped renewing for a whole duration.
func TestStandbyWaitsForALiveHolder(t *testing.T) {
	m := objstore.NewMemory()
	const short = 300 * time.Millisecond
	for _, stop := range []string{"release", "die"} {
		t.Run(stop, func(t *testing.T) {
			a, err := Take(context.Background(), Config{Bucket: m, Node: "node a", Duration: short})
			if err != nil {
				t.Fatal(err)
			}
			taken := make(chan *Lease, 1)
			go func() {
				b, err := Take(context.Background(), Config{Bucket: m, Node: "node b", Duration: short, Wait: true})
				if err != nil {
					t.Error(err)
				}
				taken <- b
			}()
			select {
			case <-taken:
				t.Fatal("the standby took the prefix from a live holder")
			case <-time.After(4 * short): // a renews every short/3 meanwhile
			}
			if !a.Writable() {
				t.Fatal("the holder lost its lease beside a standby")
			}
			stopped := time.Now()
			if stop == "release" {
				if err := a.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			} else {
				close(a.stop) // renewals stop: as a SIGKILL
				<-a.done
			}
			b := <-taken
			took := time.Since(stopped)
			defer b.Close(context.Background())
			if b.Epoch() != a.Epoch()+1 || !b.Writable() {
				t.Fatalf("standby took epoch %d (holder's %d), writable %v", b.Epoch(), a.Epoch(), b.Writable())
			}
			if stop == "die" && took < short-short/3 {
				t.Fatalf("took the prefix %v after the holder's last renewal could have landed, before a duration (%v)", took, short)
			}
			if limit := short + time.Second; took > limit {
				t.Fatalf("took the prefix %v after the holder stopped (%s), want at most %v", took, stop, limit)
			}
			if err := b.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			// the next subtest's holder takes the released prefix at once
		})
	}
}
