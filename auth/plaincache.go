package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
)

// PLAIN sends the password itself, so the broker must derive its SCRAM StoredKey (PBKDF2, at
// least 4096 iterations: milliseconds of CPU) to check it. Two things keep that cost off
// clients that get it right and bound it for those that do not:
//
//   - A cache of verified passwords. After a PLAIN login succeeds, the cache keeps
//     HMAC-SHA256(key, user, password) under a key drawn at random when the process first
//     needs it, mapped to the credential the password was checked against. A later login with
//     the same user and password against the same credential (the same *Credential: a changed
//     password or a replaced user publishes a new one, so a stale entry never matches) costs
//     one HMAC. The cache never holds a password or anything derived from one without the
//     key, and the key never leaves the process; but a dump of the process's memory would let
//     an attacker test guesses at HMAC speed against the cached entries, instead of at PBKDF2
//     speed against the credentials (which the same dump holds). It holds at most
//     maxPlainCache entries; when full, an arbitrary one is dropped.
//   - A Gate, the caller's limit on derivations (the server's: a token bucket of failed
//     attempts per client address). Asked before each derivation the cache cannot spare; a
//     refusal fails the exchange at once with ErrTooManyFailures, which wraps
//     ErrAuthenticationFailed, so the client sees the same answer as for a wrong password.
//
// The cache lookup compares MACs under a secret key (a map lookup, not constant time, but its
// timing tells nothing without the key); the password check itself stays hmac.Equal.

// maxPlainCache bounds the cache: one entry per distinct (user, password) that succeeded.
const maxPlainCache = 4096

// ErrTooManyFailures is the error of a PLAIN exchange whose Gate refused a derivation.
var ErrTooManyFailures = errors.New("too many failed authentications from this address")

// Gate limits the password derivations a PLAIN exchange may run: Take is called before one and
// reports whether it may go ahead; Return is called after a derivation that Take allowed found
// the password right (only failures are meant to be counted). A nil Gate allows everything.
type Gate interface {
	Take() bool
	Return()
}

type plainCache struct {
	keyOnce sync.Once
	key     [32]byte

	mu sync.Mutex
	m  map[[sha256.Size]byte]*Credential

	derivations atomic.Int64 // PBKDF2 runs for PLAIN, for PlainDerivations
}

func (c *plainCache) tag(user, password []byte) [sha256.Size]byte {
	c.keyOnce.Do(func() {
		if _, err := rand.Read(c.key[:]); err != nil {
			panic("auth: BUG: crypto/rand failed: " + err.Error())
		}
	})
	m := hmac.New(sha256.New, c.key[:])
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(user))) // so that (ab, c) and (a, bc) differ
	m.Write(n[:])
	m.Write(user)
	m.Write(password)
	var t [sha256.Size]byte
	m.Sum(t[:0])
	return t
}

// verified reports whether the password of tag was verified against cred.
func (c *plainCache) verified(tag [sha256.Size]byte, cred *Credential) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[tag] == cred
}

func (c *plainCache) add(tag [sha256.Size]byte, cred *Credential) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[sha256.Size]byte]*Credential)
	}
	if _, ok := c.m[tag]; !ok && len(c.m) >= maxPlainCache {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[tag] = cred
}

// PlainDerivations is how many PLAIN logins have derived a password's key (run PBKDF2) since
// u was made: the cost the cache and the Gate bound.
func (u *Users) PlainDerivations() int64 {
	if u == nil {
		return 0
	}
	return u.plain.derivations.Load()
}
