package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"inlet/server"
)

// plainAttempt logs in with PLAIN over a fresh raw connection to addr and returns the
// SaslAuthenticate error code, or -1 if the connection closed before an answer.
func plainAttempt(t *testing.T, addr, user, pw string) int16 {
	t.Helper()
	rc := dialRaw(t, addr)
	defer rc.c.Close()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Errorf("handshake: %d", r.ErrorCode)
		return -1
	}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pw)
	corr := rc.send(req)
	gotCorr, body, err := rc.readFrame(15 * time.Second)
	if err != nil {
		return -1
	}
	if gotCorr != corr {
		t.Errorf("correlation id %d, want %d", gotCorr, corr)
		return -1
	}
	resp, err := decodeResponse(req, body)
	if err != nil {
		t.Error(err)
		return -1
	}
	return resp.(*kmsg.SASLAuthenticateResponse).ErrorCode
}

// TestWrongPlainPasswordsStopCostingPBKDF2 guards against cheap CPU burning: every wrong
// PLAIN password cost a PBKDF2 on the worker, so 100 connections retrying from one address
// (not waiting out the failed-authentication delay) burned the node's CPU. Now an address's
// failures spend a token bucket (10, one back a second), and past it an attempt is answered
// SASL_AUTHENTICATION_FAILED without a derivation; a client whose password was verified before
// still logs in from the same address during the flood (the cache of verified passwords
// answers it with one HMAC), and produces.
func TestWrongPlainPasswordsStopCostingPBKDF2(t *testing.T) {
	b := secureBroker(t, newTestCA(t), func(c *server.Config) { c.FailedAuthenticationDelay = 5 * time.Millisecond })
	addr := b.srv.ListenerAddr("sasl")
	users := b.srv // PlainDerivations: the server's count

	// The legitimate client logs in once before the attack: one derivation.
	if code := plainAttempt(t, addr, "alice", "alice-secret"); code != 0 {
		t.Fatalf("first login: error %d", code)
	}
	if n := users.PlainDerivations(); n != 1 {
		t.Fatalf("%d derivations after one login, want 1", n)
	}

	const attempts, parallel = 100, 100
	began := time.Now()
	var wg sync.WaitGroup
	codes := make(chan int16, attempts)
	sem := make(chan struct{}, parallel)
	for range attempts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			codes <- plainAttempt(t, addr, "alice", "wrong-password")
		}()
	}
	// While the flood runs, the right password logs in at once, again and again.
	for i := range 5 {
		start := time.Now()
		if code := plainAttempt(t, addr, "alice", "alice-secret"); code != 0 {
			t.Errorf("right password during the flood (%d): error %d", i, code)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("right password during the flood (%d) took %v", i, took)
		}
	}
	wg.Wait()
	close(codes)
	elapsed := time.Since(began)
	for code := range codes {
		if code != 58 && code != -1 { // SASL_AUTHENTICATION_FAILED, or closed after the delay
			t.Errorf("wrong password answered %d, want 58", code)
		}
	}
	// The burst, one token a second since, and the first login; nothing for the rest.
	derived := users.PlainDerivations() - 1
	if limit := int64(10 + elapsed/time.Second + 1); derived > limit {
		t.Errorf("%d of %d wrong passwords ran PBKDF2 in %v, want at most %d", derived, attempts, elapsed, limit)
	}
	refused := b.srv.Refusals()["SASL PLAIN attempts: too many failed authentications from this address"]
	if refused < attempts-derived-1 {
		t.Errorf("%d attempts refused without a derivation, want at least %d", refused, attempts-derived-1)
	}
	t.Logf("%d wrong passwords in %v: %d derivations, %d refused without one", attempts, elapsed, derived, refused)

	// A real client still authenticates and produces from the flooded address.
	roundTripKgo(t, addr, "alice.after-flood", kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
}
