package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"strings"

	"github.com/xdg-go/scram"
)

// Credential is a SCRAM credential as Kafka stores it (ScramCredential: salt, StoredKey,
// ServerKey, iterations). The password cannot be recovered from it.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// MinIterations is Kafka's minimum for SCRAM credentials (ScramMechanism.minIterations);
// MaxIterations bounds the work one PLAIN login or one config entry can cause.
const (
	MinIterations     = 4096
	MaxIterations     = 1 << 20
	DefaultIterations = 8192
)

func hashFor(mechanism string) (func() hash.Hash, error) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, nil
	case ScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("auth: %q is not a SCRAM mechanism", mechanism)
}

// NewCredential derives the SCRAM credential of password for mechanism (SCRAM-SHA-256 or
// SCRAM-SHA-512) with a random 32-byte salt.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	return DeriveCredential(mechanism, password, salt, iterations)
}

// DeriveCredential is RFC 5802's key derivation: SaltedPassword = Hi(password, salt, i),
// ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey =
// HMAC(SaltedPassword, "Server Key"). The password is used as its UTF-8 bytes, as Kafka's
// ScramFormatter does (no SASLprep).
func DeriveCredential(mechanism, password string, salt []byte, iterations int) (Credential, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("auth: iterations %d outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 {
		return Credential{}, fmt.Errorf("auth: empty salt")
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return Credential{}, err
	}
	ck := hmacSum(h, salted, "Client Key")
	sk := h()
	sk.Write(ck)
	return Credential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  sk.Sum(nil),
		ServerKey:  hmacSum(h, salted, "Server Key"),
	}, nil
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// verifyPassword derives the StoredKey of password under c's salt and iterations and compares
// it with c's in constant time.
func (c *Credential) verifyPassword(mechanism, password string) bool {
	d, err := DeriveCredential(mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return hmac.Equal(d.StoredKey, c.StoredKey)
}

// scramExchange is the server side of one SCRAM conversation (xdg-go/scram does the RFC 5802
// arithmetic, nonces and constant-time comparison). Kafka's client-first message may carry
// extensions after the nonce (KIP-86, "tokenauth=true" for delegation tokens); delegation
// tokens are not served, so a tokenauth exchange fails.
type scramExchange struct {
	users     *Users
	mechanism string
	conv      *scram.ServerConversation
	user      *User
	step      int
}

func (u *Users) newScram(mechanism string) (*scramExchange, error) {
	x := &scramExchange{users: u, mechanism: mechanism}
	lookup := func(name string) (scram.StoredCredentials, error) {
		usr, ok := u.byName[name]
		if !ok {
			return scram.StoredCredentials{}, fmt.Errorf("unknown user %q", name)
		}
		c := usr.credential(mechanism)
		if c == nil {
			return scram.StoredCredentials{}, fmt.Errorf("user %q has no %s credential", name, mechanism)
		}
		x.user = usr
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	}
	var (
		srv *scram.Server
		err error
	)
	switch mechanism {
	case ScramSHA256:
		srv, err = scram.SHA256.NewServer(lookup)
	case ScramSHA512:
		srv, err = scram.SHA512.NewServer(lookup)
	default:
		return nil, ErrUnsupportedMechanism
	}
	if err != nil {
		return nil, err
	}
	x.conv = srv.NewConversation()
	return x, nil
}

func (x *scramExchange) Mechanism() string { return x.mechanism }

// Step answers one client message. The first is client-first ("n,,n=user,r=nonce[,ext]"),
// the second client-final; after the second the exchange is done.
func (x *scramExchange) Step(msg []byte) ([]byte, bool, error) {
	x.step++
	switch x.step {
	case 1:
		if strings.Contains(string(msg), ",tokenauth=true") {
			return nil, true, fmt.Errorf("%w (delegation tokens are not supported)", ErrAuthenticationFailed)
		}
		resp, err := x.conv.Step(string(msg))
		if err != nil {
			return nil, true, fmt.Errorf("%w: %v", ErrAuthenticationFailed, err)
		}
		return []byte(resp), false, nil
	case 2:
		resp, err := x.conv.Step(string(msg))
		if err != nil || !x.conv.Valid() || x.user == nil {
			return nil, true, fmt.Errorf("%w: %v", ErrAuthenticationFailed, err)
		}
		return []byte(resp), true, nil
	}
	return nil, true, fmt.Errorf("%w: SCRAM exchange already complete", ErrAuthenticationFailed)
}

func (x *scramExchange) Principal() *Principal {
	if x.user == nil || !x.conv.Valid() {
		return nil
	}
	return &x.user.Principal
}
