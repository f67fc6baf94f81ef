// Package lease decides who may write a bucket prefix: one node at a time, the holder of the
// lease object (Key, at the prefix's root), taken and renewed with conditional writes and
// fenced by an epoch that rises at each take.
//
// The object holds the holder's node name, a random incarnation id (one per process, so a
// restarted node is another holder), the epoch, the lease duration and a renewal counter (so
// that every write has other bytes, hence another ETag: S3's ETag is the MD5 of the bytes).
//
// Take: a missing object is created (If-None-Match: *, epoch 1). A released one (its holder
// stopped gracefully) is taken at once (If-Match on its ETag, epoch + 1). Any other is
// watched: once it has stayed the same version (one ETag) for a full lease duration, measured
// from the end of the read that first saw it on this node's monotonic clock, it is taken with
// If-Match on that ETag. No clock is compared across nodes; what is assumed is that two
// monotonic clocks run at about the same rate over one duration, and the safety margin below
// absorbs what they do not. If the version changes while it is watched, its holder is alive
// (or another node took it first): Take returns a *HeldError naming the holder and the caller
// refuses to start, or, with Config.Wait (a standby), watches the new version the same way,
// for as long as it takes. A node restarted after a crash thus waits one duration for its own old
// lease; two nodes started at once get one writer and one refusal.
//
// Renew: every duration/3, PutIf on the ETag the holder last wrote. The holder is the writer
// (Writable) only until the start of its last successful write + duration - margin (margin =
// duration/5), by its monotonic clock. A taker takes no sooner than duration after that write
// was visible, so the old holder stops acknowledging at least margin before another can begin;
// a process paused past its lease (SIGSTOP, a long GC or swap stall) sees on resume, before
// any renewal is tried, that it may not acknowledge. A renewal answered 412 (or 404) whose
// object is not this incarnation's means another node took the prefix: the lease is fenced
// for good, Fenced's channel closes, and the node never writes the prefix again (it is
// restarted to take it again). A renewal that fails otherwise (5xx, timeout) is retried;
// Writable lapses with time meanwhile, and comes back if the next renewal lands on the same
// ETag, which proves no one else wrote.
//
// A lost reply (the write landed, the caller saw an error or a retry saw 412) is resolved by
// reading the object back: this incarnation's own record is adopted with its ETag, and the
// time it counts from is the start of the earliest write attempt not yet confirmed, never a
// later one.
//
// Close writes the lease released (If-Match), so that the next node takes it without waiting.
//
// What the epoch protects: the writes a holder started just before its lease ran out may land
// after a taker began (a request in flight, a paused process's last call). Everything the
// holder writes carries its epoch (tier's object keys, the commit objects), so a reader or a
// cleaner never takes an object of an older epoch written after the take for its own, and a
// cleaner never deletes what a newer epoch wrote.
package lease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"inlet/objstore"
)

// Key is the lease object's key, at the root of the bucket prefix.
const Key = "writer.lease"

// DefaultDuration is the lease duration when Config.Duration is 0.
const DefaultDuration = 10 * time.Second

// Record is the lease object's content (JSON).
type Record struct {
	// Node names the holder for people: its node id and address.
	Node string `json:"node"`
	// Incarnation is random per process: it tells this run's writes from any other's.
	Incarnation string `json:"incarnation"`
	// Epoch rises by one at each take; 1 for the first holder of a prefix.
	Epoch uint64 `json:"epoch"`
	// DurationMs is the holder's lease duration: how long a taker watches an unchanged
	// version before it takes the prefix.
	DurationMs int64 `json:"duration_ms"`
	// Renewals counts the holder's writes since its take.
	Renewals uint64 `json:"renewals"`
	// Released: the holder stopped gracefully; the next node takes it at once.
	Released bool `json:"released,omitempty"`
}

func (r Record) duration() time.Duration { return time.Duration(r.DurationMs) * time.Millisecond }

// Clock is a monotonic clock: Now is the time since an arbitrary origin, which never goes
// back; Sleep waits d or until ctx ends.
type Clock interface {
	Now() time.Duration
	Sleep(ctx context.Context, d time.Duration) error
}

type monotonic struct{ origin time.Time }

// time.Since reads the monotonic clock (package time: "Monotonic Clocks").
func (m monotonic) Now() time.Duration { return time.Since(m.origin) }

func (monotonic) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Config is a lease's configuration.
type Config struct {
	Bucket objstore.Bucket
	// Node names this node in the lease (for the others' logs and errors).
	Node string
	// Duration is the lease duration (default DefaultDuration): a taker watches an unchanged
	// lease this long before it takes it; the holder renews every Duration/3.
	Duration time.Duration
	Logger   *slog.Logger
	// Clock is nil for the process's monotonic clock (tests set a fake one).
	Clock Clock
	// Wait makes Take wait for as long as a live holder renews the lease (a standby), rather
	// than return a *HeldError: it takes the prefix once the holder releases it or stops
	// renewing it for a duration.
	Wait bool
}

func (c *Config) fill() {
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = monotonic{time.Now()}
	}
}

// HeldError: another holder renewed the lease while Take watched it; the prefix is being
// written by another node.
type HeldError struct {
	Holder Record
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease: the bucket prefix is held by %s (epoch %d), which renewed its lease while this node waited for it to expire: another node writes this prefix; stop it first, or give this node its own prefix",
		e.Holder.Node, e.Holder.Epoch)
}

// Lease is a held lease: Writable says whether the holder may acknowledge now. Safe for
// concurrent use.
type Lease struct {
	cfg    Config
	margin time.Duration

	// validFrom is the clock's reading at the start of the last confirmed write; Writable
	// until validFrom + Duration - margin.
	validFrom atomic.Int64
	epoch     uint64
	fencedCh  chan struct{}
	fenced    atomic.Bool
	closed    atomic.Bool
	renewals  atomic.Uint64 // confirmed

	mu       sync.Mutex // guards what the renewals change
	rec      Record     // this incarnation's record as last written
	etag     string     // the ETag of the version this incarnation wrote last (confirmed)
	pending  bool       // a write's outcome is unknown
	pendFrom int64      // the start of the earliest unconfirmed write
	fencedBy Record

	looping bool // Take started renewLoop (tests renew by hand)
	stop    chan struct{}
	done    chan struct{}
}

// Take takes the lease (see the package comment), blocking until it holds it, ctx ends, or
// the lease is found held by a live holder (*HeldError). The returned lease renews itself
// until Close.
func Take(ctx context.Context, cfg Config) (*Lease, error) {
	l, err := take(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l.looping = true
	go l.renewLoop()
	return l, nil
}

func take(ctx context.Context, cfg Config) (*Lease, error) {
	if cfg.Bucket == nil {
		return nil, errors.New("lease: no bucket")
	}
	cfg.fill()
	var inc [16]byte
	if _, err := rand.Read(inc[:]); err != nil {
		return nil, err
	}
	l := &Lease{cfg: cfg, margin: cfg.Duration / 5, fencedCh: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	mine := Record{Node: cfg.Node, Incarnation: hex.EncodeToString(inc[:]), DurationMs: cfg.Duration.Milliseconds()}
	clock := cfg.Clock
	poll := min(max(cfg.Duration/10, 10*time.Millisecond), time.Second)
	var (
		watched   string        // the ETag being watched
		seenAt    time.Duration // when it was first seen
		attempt   = int64(-1)   // the start of the earliest take not yet confirmed
		lastError error
		loggedAt  = time.Duration(-1)
	)
	try := func(r Record, ifMatch string) (done bool) {
		now := clock.Now()
		if attempt < 0 {
			attempt = int64(now)
		}
		etag, err := l.write(ctx, r, ifMatch)
		if err == nil {
			l.held(r, etag, attempt)
			return true
		}
		// ErrExists/ErrPreconditionFailed: another took it, or this very write landed
		// with its reply lost; the next read tells.
		lastError = err
		return false
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lease: taking %s: %w (last error: %v)", Key, err, lastError)
		}
		cctx, cancel := l.callCtx(ctx)
		data, etag, err := cfg.Bucket.Get(cctx, Key)
		cancel()
		now := clock.Now()
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			r := mine
			r.Epoch = 1
			if try(r, "") {
				cfg.Logger.Info("lease: took the bucket prefix, which had no writer", "epoch", r.Epoch)
				return l, nil
			}
		case err != nil:
			lastError = err
			if loggedAt < 0 || now-loggedAt >= 10*time.Second { // a bucket down at start: one line per 10 s
				loggedAt = now
				cfg.Logger.Warn("lease: reading the lease failed; retrying", "err", err)
			}
		default:
			cur, err := decode(data)
			if err != nil {
				return nil, err
			}
			switch {
			case cur.Incarnation == mine.Incarnation:
				// This node's take landed, its reply lost.
				l.held(cur, etag, attempt)
				cfg.Logger.Info("lease: took the bucket prefix", "epoch", cur.Epoch)
				return l, nil
			case cur.Released:
				r := mine
				r.Epoch = cur.Epoch + 1
				if try(r, etag) {
					cfg.Logger.Info("lease: took the bucket prefix, released by its last writer", "epoch", r.Epoch, "previous", cur.Node)
					return l, nil
				}
			case watched == "" && cfg.Wait:
				watched, seenAt = etag, now
				cfg.Logger.Info("lease: the bucket prefix is held; standing by until its holder releases it or stops renewing it",
					"holder", cur.Node, "epoch", cur.Epoch, "duration", cur.duration())
			case watched == "":
				watched, seenAt = etag, now
				cfg.Logger.Warn("lease: the bucket prefix is held; waiting one lease duration for it to expire (a holder that renews it meanwhile is alive, and this node refuses to start)",
					"holder", cur.Node, "epoch", cur.Epoch, "duration", cur.duration())
			case etag != watched && cfg.Wait:
				watched, seenAt = etag, now // renewed: alive; watched again from now
			case etag != watched:
				return nil, &HeldError{Holder: cur}
			case now-seenAt >= cur.duration():
				r := mine
				r.Epoch = cur.Epoch + 1
				if try(r, etag) {
					cfg.Logger.Warn("lease: took the bucket prefix from a holder that stopped renewing it", "epoch", r.Epoch, "previous", cur.Node, "waited", now-seenAt)
					return l, nil
				}
			}
		}
		if err := clock.Sleep(ctx, poll); err != nil {
			continue // reported at the top
		}
	}
}

// held makes l the holder of r's version etag, written by a call that started at from.
func (l *Lease) held(r Record, etag string, from int64) {
	l.rec, l.etag, l.epoch = r, etag, r.Epoch
	l.validFrom.Store(from)
	l.renewals.Store(r.Renewals)
}

func (l *Lease) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(l.cfg.Duration/2, time.Second))
}

func (l *Lease) write(ctx context.Context, r Record, ifMatch string) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	return l.cfg.Bucket.PutIf(cctx, Key, bytes.NewReader(b), int64(len(b)), ifMatch)
}

func decode(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil || r.Incarnation == "" || r.Epoch == 0 || r.DurationMs <= 0 {
		return Record{}, fmt.Errorf("lease: %s does not hold a lease (%q): remove it only if no node uses this prefix", Key, truncate(b))
	}
	return r, nil
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// renewLoop renews every Duration/3 after the last confirmed write, and every Duration/10
// after a failed one, until Close or the lease is fenced.
func (l *Lease) renewLoop() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	clock := l.cfg.Clock
	var tried time.Duration // when the last renewal began
	for {
		wait := time.Duration(l.validFrom.Load()) + l.cfg.Duration/3 - clock.Now()
		l.mu.Lock()
		if l.pending {
			// The last renewal failed, past its due time: the next one Duration/10 after
			// it began, not at once (a bucket that is down would be called back to back).
			wait = tried + l.cfg.Duration/10 - clock.Now()
		}
		l.mu.Unlock()
		if wait > 0 {
			if clock.Sleep(ctx, wait) != nil {
				return
			}
		}
		tried = clock.Now()
		if l.renew(ctx) == errFenced {
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

var errFenced = errors.New("lease: fenced: another node took the bucket prefix")

// renew writes the next renewal. It returns errFenced once another node holds the lease, and
// the write's error otherwise (the caller retries).
func (l *Lease) renew(ctx context.Context) error {
	if l.fenced.Load() {
		return errFenced
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	start := int64(l.cfg.Clock.Now())
	if !l.pending {
		l.pending, l.pendFrom = true, start
	}
	next := l.rec
	next.Renewals++
	etag, err := l.write(ctx, next, l.etag)
	if err == nil {
		l.confirm(next, etag, start)
		return nil
	}
	if !errors.Is(err, objstore.ErrPreconditionFailed) && !errors.Is(err, objstore.ErrNotFound) {
		// Unknown outcome: the next renewal carries another counter, so a landed one
		// shows as 412 then and is read back.
		l.rec = next
		l.cfg.Logger.Warn("lease: renewal failed; retrying", "err", err, "writable_for", l.Remaining())
		return err
	}
	// The object is not the version this incarnation last confirmed: a renewal of its own
	// whose reply was lost, or another node's take.
	cctx, cancel := l.callCtx(ctx)
	data, cur, gerr := l.cfg.Bucket.Get(cctx, Key)
	cancel()
	if gerr != nil && !errors.Is(gerr, objstore.ErrNotFound) {
		l.rec = next
		return gerr
	}
	var r Record
	if gerr == nil {
		if r, gerr = decode(data); gerr == nil && r.Incarnation == l.rec.Incarnation && r.Epoch == l.epoch && !r.Released {
			// Its own write landed: counted from the earliest unconfirmed write.
			l.confirm(r, cur, l.pendFrom)
			return nil
		}
	}
	l.fencedBy = r
	l.fenced.Store(true)
	close(l.fencedCh)
	l.cfg.Logger.Error("lease: fenced: another node took the bucket prefix; this node acknowledges nothing more (restart it to take the prefix again)",
		"by", r.Node, "epoch", r.Epoch, "own_epoch", l.epoch)
	return errFenced
}

// confirm records a write known to have landed: r as etag, from the clock reading from.
func (l *Lease) confirm(r Record, etag string, from int64) {
	l.rec, l.etag, l.pending = r, etag, false
	if from > l.validFrom.Load() {
		l.validFrom.Store(from)
	}
	l.renewals.Store(r.Renewals)
}

// Epoch is the lease's epoch: every object this holder writes carries it.
func (l *Lease) Epoch() uint64 { return l.epoch }

// Remaining is how long this node is still the writer (0 when it is not): a call to the
// bucket that changes the prefix starts only while it is positive, with a deadline within it.
func (l *Lease) Remaining() time.Duration {
	if l.fenced.Load() || l.closed.Load() {
		return 0
	}
	return max(time.Duration(l.validFrom.Load())+l.cfg.Duration-l.margin-l.cfg.Clock.Now(), 0)
}

// Writable reports whether this node may acknowledge writes now: it holds the lease, it is
// not fenced, and its last renewal is recent enough (an atomic load and a clock reading).
func (l *Lease) Writable() bool { return l.Remaining() > 0 }

// Fenced is closed once another node has taken the prefix.
func (l *Lease) Fenced() <-chan struct{} { return l.fencedCh }

// State is what the metrics and /readyz tell of the lease.
type State struct {
	Epoch uint64
	// Writer: Writable now.
	Writer bool
	// Fenced: another node took the prefix; FencedBy is its record (empty if the lease
	// object was gone).
	Fenced   bool
	FencedBy Record
	Renewals uint64
}

// State reads the lease's state.
func (l *Lease) State() State {
	s := State{Epoch: l.epoch, Writer: l.Writable(), Fenced: l.fenced.Load(), Renewals: l.renewals.Load()}
	if s.Fenced {
		l.mu.Lock()
		s.FencedBy = l.fencedBy
		l.mu.Unlock()
	}
	return s
}

// NotWritableReason is why this node is not the writer ("" while it is), for /readyz.
func (s State) NotWritableReason() string {
	switch {
	case s.Writer:
		return ""
	case s.Fenced && s.FencedBy.Epoch != 0:
		return fmt.Sprintf("fenced: prefix taken by %s epoch %d", s.FencedBy.Node, s.FencedBy.Epoch)
	case s.Fenced:
		return "fenced: the bucket lease was removed"
	}
	return "bucket lease not held: the last renewal is older than the lease allows"
}

// Close stops renewing and, unless fenced, writes the lease released so that the next node
// takes the prefix at once. The node is not the writer after Close.
func (l *Lease) Close(ctx context.Context) error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.stop)
	if l.looping {
		<-l.done
	}
	if l.fenced.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec
	r.Renewals++
	r.Released = true
	_, err := l.write(ctx, r, l.etag)
	if err == nil {
		return nil
	}
	if errors.Is(err, objstore.ErrPreconditionFailed) {
		// A lost reply of the release itself, or of a renewal before it, or another
		// node's take: only the first two leave this incarnation's record to release.
		cctx, cancel := l.callCtx(ctx)
		data, cur, gerr := l.cfg.Bucket.Get(cctx, Key)
		cancel()
		if gerr == nil {
			if got, derr := decode(data); derr == nil && got.Incarnation == l.rec.Incarnation {
				if got.Released {
					return nil
				}
				r.Renewals = got.Renewals + 1
				_, err = l.write(ctx, r, cur)
				if err == nil {
					return nil
				}
			} else {
				return nil // another node's: nothing of this one to release
			}
		}
	}
	return fmt.Errorf("lease: releasing: %w (the next node waits one lease duration)", err)
}
