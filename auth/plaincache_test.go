package auth

import (
	"errors"
	"fmt"
	"testing"
)

// plainLogin runs one PLAIN exchange for user and password through g (nil: no gate).
func plainLogin(t *testing.T, u *Users, g Gate, user, password string) error {
	t.Helper()
	x, err := u.StartGated(Plain, g)
	if err != nil {
		t.Fatal(err)
	}
	_, done, err := x.Step([]byte("\x00" + user + "\x00" + password))
	if !done {
		t.Fatal("PLAIN not done after one step")
	}
	if err == nil && (x.Principal() == nil || x.Principal().Name != user) {
		t.Fatalf("authenticated as %v, want %s", x.Principal(), user)
	}
	return err
}

// countingGate allows up to tokens derivations and counts what it is asked.
type countingGate struct{ tokens, takes, returns int }

func (g *countingGate) Take() bool {
	g.takes++
	if g.tokens <= 0 {
		return false
	}
	g.tokens--
	return true
}

func (g *countingGate) Return() { g.returns++; g.tokens++ }

func TestPlainCacheSkipsDerivationForAVerifiedPassword(t *testing.T) {
	u := testUsers(t)
	if err := plainLogin(t, u, nil, "alice", "alice-secret"); err != nil {
		t.Fatal(err)
	}
	if n := u.PlainDerivations(); n != 1 {
		t.Fatalf("%d derivations after the first login, want 1", n)
	}
	for range 10 {
		if err := plainLogin(t, u, nil, "alice", "alice-secret"); err != nil {
			t.Fatal(err)
		}
	}
	if n := u.PlainDerivations(); n != 1 {
		t.Fatalf("%d derivations after 10 more logins with the same password, want still 1", n)
	}
	// Another user's verified password is not alice's.
	if err := plainLogin(t, u, nil, "alice", "bob-secret"); err == nil {
		t.Fatal("alice logged in with bob's password")
	}
}

func TestPlainCacheNeverKeepsAWrongPassword(t *testing.T) {
	u := testUsers(t)
	for i := range 5 {
		if err := plainLogin(t, u, nil, "alice", "wrong"); !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("attempt %d: %v, want ErrAuthenticationFailed", i, err)
		}
	}
	if n := u.PlainDerivations(); n != 5 {
		t.Fatalf("%d derivations for 5 wrong passwords, want 5 (failures are never cached)", n)
	}
}

// TestPlainCacheForgetsAChangedCredential: an entry names the credential it was verified
// against, so after the user's password changes the old password fails and costs a
// derivation again.
func TestPlainCacheForgetsAChangedCredential(t *testing.T) {
	u := testUsers(t)
	if err := plainLogin(t, u, nil, "alice", "alice-secret"); err != nil {
		t.Fatal(err)
	}
	c, err := NewCredential(ScramSHA256, "new-secret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Update(func(m map[string]*User) error {
		old := m["alice"]
		m["alice"] = &User{Principal: old.Principal, SHA256: &c}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := plainLogin(t, u, nil, "alice", "alice-secret"); err == nil {
		t.Fatal("the old password still logs in after the credential changed")
	}
	if err := plainLogin(t, u, nil, "alice", "new-secret"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if n := u.PlainDerivations(); n != 3 {
		t.Fatalf("%d derivations, want 3 (first login, the stale password, the new one)", n)
	}
	// A deleted user is gone, cache or not.
	if err := u.Update(func(m map[string]*User) error { delete(m, "alice"); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := plainLogin(t, u, nil, "alice", "new-secret"); err == nil {
		t.Fatal("a deleted user logged in from the cache")
	}
}

// TestPlainGateRefusesWithoutDeriving: once the gate has no tokens, a password the cache has
// not seen fails at once, with an error that wraps both ErrAuthenticationFailed (what the
// client is told) and ErrTooManyFailures; a verified password still passes, costing no token.
func TestPlainGateRefusesWithoutDeriving(t *testing.T) {
	u := testUsers(t)
	g := &countingGate{tokens: 2}
	if err := plainLogin(t, u, g, "alice", "alice-secret"); err != nil {
		t.Fatal(err)
	}
	if g.takes != 1 || g.returns != 1 || g.tokens != 2 {
		t.Fatalf("a successful derivation: %+v, want one take given back", g)
	}
	for range 2 {
		if err := plainLogin(t, u, g, "alice", "wrong"); err == nil || errors.Is(err, ErrTooManyFailures) {
			t.Fatalf("a wrong password within the gate's tokens: %v", err)
		}
	}
	before := u.PlainDerivations()
	for range 20 {
		err := plainLogin(t, u, g, "alice", "wrong")
		if !errors.Is(err, ErrTooManyFailures) || !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("past the gate: %v, want ErrTooManyFailures wrapping ErrAuthenticationFailed", err)
		}
	}
	if err := plainLogin(t, u, g, "bob", "bob-secret"); !errors.Is(err, ErrTooManyFailures) {
		t.Fatalf("an unverified right password past the gate: %v, want ErrTooManyFailures", err)
	}
	if n := u.PlainDerivations(); n != before {
		t.Fatalf("%d derivations past the gate, want none", n-before)
	}
	if err := plainLogin(t, u, g, "alice", "alice-secret"); err != nil {
		t.Fatalf("a verified password past the gate: %v", err)
	}
}

// TestPlainCacheTagSeparatesUserFromPassword: the MAC covers the user name's length, so
// (ab, c) and (a, bc) are different entries.
func TestPlainCacheTagSeparatesUserFromPassword(t *testing.T) {
	var c plainCache
	if c.tag([]byte("ab"), []byte("c")) == c.tag([]byte("a"), []byte("bc")) {
		t.Fatal("tags of (ab, c) and (a, bc) collide")
	}
	if c.tag([]byte("a"), []byte("b")) != c.tag([]byte("a"), []byte("b")) {
		t.Fatal("the tag is not a function of its input")
	}
	var d plainCache
	if c.tag([]byte("a"), []byte("b")) == d.tag([]byte("a"), []byte("b")) {
		t.Fatal("two caches share a key")
	}
}

func TestPlainCacheIsBounded(t *testing.T) {
	var c plainCache
	cred := &Credential{}
	for i := range maxPlainCache + 100 {
		c.add(c.tag([]byte("u"), fmt.Appendf(nil, "p%d", i)), cred)
	}
	if len(c.m) != maxPlainCache {
		t.Fatalf("%d entries, want at most %d", len(c.m), maxPlainCache)
	}
	// The newest entry is always kept.
	if !c.verified(c.tag([]byte("u"), fmt.Appendf(nil, "p%d", maxPlainCache+99)), cred) {
		t.Fatal("the entry just added was dropped")
	}
}
