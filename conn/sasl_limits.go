package conn

import (
	"sync"
	"time"
)

// Failed PLAIN derivations per client address. A PLAIN password the cache has not seen
// verified (auth/plaincache.go) costs a PBKDF2 on the connection's worker: 100 connections
// retrying wrong passwords took a legitimate producer's p99 from 31 ms to 108 ms. So each
// address has a token bucket of attempts: a derivation takes a token first, one that finds
// the password right gives it back, and so only failures spend them. The bucket holds
// plainAttemptBurst tokens and regains one every plainAttemptRefill; an address with none left
// is answered SASL_AUTHENTICATION_FAILED without a derivation, after
// connection.failed.authentication.delay.ms (limits.go) like any failure, and closed. A client
// whose password was verified before (since start-up, from any address) still logs in from a
// refused address: the cache answers it without a token. Kafka has no such limit (its PLAIN
// compares passwords from the JAAS file; SCRAM puts the derivation on the client, and so
// does Inlet's SCRAM).
const (
	plainAttemptBurst  = 10
	plainAttemptRefill = time.Second
	// maxAttemptBuckets bounds the table; past it, full buckets are dropped, and if none is,
	// addresses without a bucket share one (an attacker with many addresses then spends the
	// shared bucket, never memory).
	maxAttemptBuckets = 1 << 16
)

// attemptBuckets is the per-address token buckets. Its mutex takes no other lock.
type attemptBuckets struct {
	mu       sync.Mutex
	m        map[string]*attemptBucket
	overflow attemptBucket
}

// attemptBucket holds tokens as of at.
type attemptBucket struct {
	tokens float64
	at     time.Time
}

// refill brings b up to now; a new bucket (zero at) is full.
func (b *attemptBucket) refill(now time.Time) {
	if b.at.IsZero() {
		b.tokens, b.at = plainAttemptBurst, now
		return
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(plainAttemptBurst, b.tokens+float64(d)/float64(plainAttemptRefill))
		b.at = now
	}
}

// bucket returns ip's bucket, refilled to now. Called with a.mu held.
func (a *attemptBuckets) bucket(ip string, now time.Time) *attemptBucket {
	if a.m == nil {
		a.m = make(map[string]*attemptBucket)
	}
	b := a.m[ip]
	if b == nil {
		if len(a.m) >= maxAttemptBuckets {
			a.sweepLocked(now)
		}
		if len(a.m) >= maxAttemptBuckets {
			b = &a.overflow
		} else {
			b = &attemptBucket{}
			a.m[ip] = b
		}
	}
	b.refill(now)
	return b
}

// take spends one of ip's tokens, or reports that none is left.
func (a *attemptBuckets) take(ip string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.bucket(ip, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// give returns a token that take spent.
func (a *attemptBuckets) give(ip string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.bucket(ip, now)
	b.tokens = min(plainAttemptBurst, b.tokens+1)
}

// sweepLocked drops the buckets that have refilled completely: they hold nothing a fresh
// bucket would not.
func (a *attemptBuckets) sweepLocked(now time.Time) {
	for ip, b := range a.m {
		if b.refill(now); b.tokens >= plainAttemptBurst {
			delete(a.m, ip)
		}
	}
}

// plainGate is the auth.Gate of one connection's exchanges: its address's bucket.
type plainGate struct {
	n  *Node
	ip string
}

func (g plainGate) Take() bool {
	if g.n.plainAttempts.take(g.ip, time.Now()) {
		return true
	}
	g.n.refused(g.ip, plainAttemptsRefused)
	return false
}

func (g plainGate) Return() { g.n.plainAttempts.give(g.ip, time.Now()) }

// plainAttemptsRefused is the Refusals reason (and log line) of an attempt the bucket refused.
const plainAttemptsRefused = "SASL PLAIN attempts: too many failed authentications from this address"
