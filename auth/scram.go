package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
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

// CredentialFromSalted is the credential of a salted password (RFC 5802's SaltedPassword =
// Hi(password, salt, i)), as AlterUserScramCredentials carries it: the client derives it, so
// the password never reaches the broker. As Kafka's ScramControlManager, the salt and the
// salted password are taken as they come (any length, empty included): HMAC takes a key of
// any length, and a client that derived them otherwise only fails to log in.
func CredentialFromSalted(mechanism string, salt, salted []byte, iterations int) (Credential, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("auth: iterations %d outside [%d, %d]", iterations, MinIterations, MaxIterations)
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
	return CredentialFromSalted(mechanism, salt, salted, iterations)
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

// scramExchange is the server side of one SCRAM conversation (RFC 5802), written here rather
// than taken from xdg-go/scram because Kafka's ScramSaslServer is laxer than the RFC in one
// place clients depend on: it accepts a client-final nonce that merely ends with the server's
// nonce. Older librdkafka (1.x, e.g. Debian's kcat) sends client nonce + server nonce there,
// and xdg-go's server, which demands equality, refuses it. Kafka's client-first message may
// carry extensions after the nonce (KIP-86, "tokenauth=true" for delegation tokens);
// delegation tokens are not served, so a tokenauth exchange fails. Channel binding is not
// offered (gs2 flag "n" or "y" only).
type scramExchange struct {
	users     *Users
	mechanism string
	h         func() hash.Hash
	step      int

	user      *User
	cred      *Credential
	gs2Header string // "n,," or "y,,a=..." as sent
	c1bare    string
	s1        string
	nonce     string // the combined nonce sent in server-first
	valid     bool
}

func (u *Users) newScram(mechanism string) (*scramExchange, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return nil, ErrUnsupportedMechanism
	}
	return &scramExchange{users: u, mechanism: mechanism, h: h}, nil
}

func (x *scramExchange) Mechanism() string { return x.mechanism }

func scramFail(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrAuthenticationFailed}, a...)...)
}

// Step answers one client message. The first is client-first ("n,,n=user,r=nonce[,ext]"),
// the second client-final; after the second the exchange is done.
func (x *scramExchange) Step(msg []byte) ([]byte, bool, error) {
	x.step++
	switch x.step {
	case 1:
		s1, err := x.first(string(msg))
		if err != nil {
			return nil, true, err
		}
		return []byte(s1), false, nil
	case 2:
		s2, err := x.final(string(msg))
		if err != nil {
			return nil, true, err
		}
		return []byte(s2), true, nil
	}
	return nil, true, scramFail("SCRAM exchange already complete")
}

func (x *scramExchange) first(c1 string) (string, error) {
	// gs2-header: gs2-cbind-flag "," [authzid] ","
	var flag string
	switch {
	case strings.HasPrefix(c1, "n,"), strings.HasPrefix(c1, "y,"):
		flag = c1[:2]
	default:
		return "", scramFail("unsupported channel binding flag")
	}
	rest := c1[2:]
	comma := strings.IndexByte(rest, ',')
	if comma < 0 {
		return "", scramFail("malformed client-first message")
	}
	authzid := rest[:comma]
	x.gs2Header = flag + rest[:comma+1]
	x.c1bare = rest[comma+1:]
	fields := strings.Split(x.c1bare, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return "", scramFail("malformed client-first message")
	}
	name, ok := decodeSaslName(fields[0][2:])
	if !ok || name == "" {
		return "", scramFail("malformed user name")
	}
	if authzid != "" {
		az, ok := decodeSaslName(strings.TrimPrefix(authzid, "a="))
		if !ok || !strings.HasPrefix(authzid, "a=") || az != name {
			return "", scramFail("authorization id differs from the user name")
		}
	}
	cnonce := fields[1][2:]
	if cnonce == "" || !printableNonce(cnonce) {
		return "", scramFail("malformed client nonce")
	}
	for _, ext := range fields[2:] {
		if ext == "tokenauth=true" {
			return "", scramFail("delegation tokens are not supported")
		}
	}
	usr, ok := x.users.Lookup(name)
	if !ok {
		return "", scramFail("unknown user")
	}
	cred := usr.credential(x.mechanism)
	if cred == nil {
		return "", scramFail("user has no %s credential", x.mechanism)
	}
	x.user, x.cred = usr, cred
	x.nonce = cnonce + alnumNonce()
	x.s1 = "r=" + x.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return x.s1, nil
}

func (x *scramExchange) final(c2 string) (string, error) {
	i := strings.LastIndex(c2, ",p=")
	if i < 0 {
		return "", scramFail("client-final message has no proof")
	}
	c2wop, proofB64 := c2[:i], c2[i+3:]
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return "", scramFail("proof is not base64")
	}
	fields := strings.Split(c2wop, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return "", scramFail("malformed client-final message")
	}
	cb, err := base64.StdEncoding.DecodeString(fields[0][2:])
	if err != nil || string(cb) != x.gs2Header {
		return "", scramFail("channel binding does not match the gs2 header")
	}
	// ScramSaslServer: clientFinalMessage.nonce().endsWith(serverFirstMessage.nonce()).
	if !strings.HasSuffix(fields[1][2:], x.nonce) {
		return "", scramFail("nonce does not match")
	}
	authMsg := []byte(x.c1bare + "," + x.s1 + "," + c2wop)
	clientSig := hmacSum(x.h, x.cred.StoredKey, string(authMsg))
	if len(proof) != len(clientSig) {
		return "", scramFail("proof has the wrong length")
	}
	clientKey := make([]byte, len(proof))
	for k := range proof {
		clientKey[k] = proof[k] ^ clientSig[k]
	}
	sk := x.h()
	sk.Write(clientKey)
	if !hmac.Equal(sk.Sum(nil), x.cred.StoredKey) {
		return "", scramFail("bad proof")
	}
	x.valid = true
	return "v=" + base64.StdEncoding.EncodeToString(hmacSum(x.h, x.cred.ServerKey, string(authMsg))), nil
}

func (x *scramExchange) Principal() *Principal {
	if !x.valid {
		return nil
	}
	return &x.user.Principal
}

// decodeSaslName undoes RFC 5802's saslname escaping ("=2C" for ',', "=3D" for '=').
func decodeSaslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// printableNonce: RFC 5802's printable, ASCII 0x21-0x7e except ','.
func printableNonce(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// alnumNonce is the server's half of the SCRAM nonce: 32 characters of [0-9A-Za-z] from
// crypto/rand (Kafka's ScramFormatter.secureRandomString also uses alphanumerics). The modulo
// bias (256 % 62) is irrelevant for a nonce, which needs uniqueness, not uniformity.
func alnumNonce() string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("BUG: auth: crypto/rand failed: " + err.Error())
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}
