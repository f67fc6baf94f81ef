package auth

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// User is one configured user: a principal and its SCRAM credentials (either may be absent; a
// user without any credential can only be reached through a TLS client certificate whose
// common name is its name).
type User struct {
	Principal
	SHA256, SHA512 *Credential
}

func (u *User) credential(mechanism string) *Credential {
	switch mechanism {
	case ScramSHA256:
		return u.SHA256
	case ScramSHA512:
		return u.SHA512
	}
	return nil
}

// Users is the set of users. It changes at run time (users and their prefixes managed
// through the admin APIs) copy-on-write: readers take the current snapshot with one atomic
// load and never see a User change, since a change publishes new User values in a new map.
// Callers must not modify a User they looked up.
type Users struct {
	mu   sync.Mutex // serialises Update
	snap atomic.Pointer[map[string]*User]

	plain plainCache // verified PLAIN passwords (plaincache.go)
}

// NewUsers indexes us by name; names must be unique and non-empty.
func NewUsers(us []User) (*Users, error) {
	m := make(map[string]*User, len(us))
	for i := range us {
		usr := us[i]
		if usr.Name == "" {
			return nil, fmt.Errorf("auth: user %d has no name", i)
		}
		if _, dup := m[usr.Name]; dup {
			return nil, fmt.Errorf("auth: user %q defined twice", usr.Name)
		}
		m[usr.Name] = &usr
	}
	u := &Users{}
	u.snap.Store(&m)
	return u, nil
}

// Lookup returns the user named name. It does not allocate.
func (u *Users) Lookup(name string) (*User, bool) {
	if u == nil {
		return nil, false
	}
	usr, ok := (*u.snap.Load())[name]
	return usr, ok
}

// All returns every user, sorted by name.
func (u *Users) All() []*User {
	if u == nil {
		return nil
	}
	m := *u.snap.Load()
	out := make([]*User, 0, len(m))
	for _, usr := range m {
		out = append(out, usr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Update applies change to a copy of the users and publishes it, unless change fails. change
// may add, replace and delete entries of the map, but must not modify the User values in it:
// to change a user it stores a new one.
func (u *Users) Update(change func(users map[string]*User) error) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	cur := *u.snap.Load()
	next := make(map[string]*User, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	if err := change(next); err != nil {
		return err
	}
	u.snap.Store(&next)
	return nil
}

// Exchange is the server side of one SASL authentication: Step takes each client message and
// returns the server's answer; done is true after the last. A non-nil error means the
// authentication failed (the error wraps ErrAuthenticationFailed); Principal is valid once
// Step returned done without error.
type Exchange interface {
	Mechanism() string
	Step(msg []byte) (resp []byte, done bool, err error)
	Principal() *Principal
}

// Start begins an exchange for mechanism, with no limit on password derivations.
func (u *Users) Start(mechanism string) (Exchange, error) { return u.StartGated(mechanism, nil) }

// StartGated begins an exchange for mechanism whose password derivations (PLAIN's PBKDF2 for a
// password the cache has not seen verified) g limits; nil is no limit. SCRAM derives nothing
// on the server (the client does), so g applies to PLAIN only.
func (u *Users) StartGated(mechanism string, g Gate) (Exchange, error) {
	switch mechanism {
	case Plain:
		return &plainExchange{users: u, gate: g}, nil
	case ScramSHA256, ScramSHA512:
		return u.newScram(mechanism)
	}
	return nil, ErrUnsupportedMechanism
}

// ParsePlain splits a PLAIN message (RFC 4616): [authzid] NUL authcid NUL passwd. The strings
// alias msg. authcid and passwd must be non-empty, and none of the parts may contain NUL.
func ParsePlain(msg []byte) (authzid, user, password []byte, err error) {
	i := bytes.IndexByte(msg, 0)
	if i < 0 {
		return nil, nil, nil, errors.New("PLAIN message has no NUL separator")
	}
	rest := msg[i+1:]
	j := bytes.IndexByte(rest, 0)
	if j < 0 {
		return nil, nil, nil, errors.New("PLAIN message has one NUL separator, want two")
	}
	authzid, user, password = msg[:i], rest[:j], rest[j+1:]
	if bytes.IndexByte(password, 0) >= 0 {
		return nil, nil, nil, errors.New("PLAIN message has more than two NUL separators")
	}
	if len(user) == 0 || len(password) == 0 {
		return nil, nil, nil, errors.New("PLAIN message has an empty user name or password")
	}
	return authzid, user, password, nil
}

// plainExchange verifies a PLAIN message against the user's SCRAM credential (SHA-256 if it
// has one, else SHA-512): from the cache of verified passwords if it is there, else by
// deriving the key, if the gate allows (plaincache.go). Kafka's PlainServerCallbackHandler
// rejects an authorization id that differs from the user name; so does this.
type plainExchange struct {
	users *Users
	gate  Gate
	user  *User
	done  bool
}

func (x *plainExchange) Mechanism() string { return Plain }

func (x *plainExchange) Step(msg []byte) ([]byte, bool, error) {
	if x.done {
		return nil, true, fmt.Errorf("%w: PLAIN exchange already complete", ErrAuthenticationFailed)
	}
	x.done = true
	authzid, user, password, err := ParsePlain(msg)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrAuthenticationFailed, err)
	}
	if len(authzid) != 0 && !bytes.Equal(authzid, user) {
		return nil, true, fmt.Errorf("%w: authorization id differs from the user name", ErrAuthenticationFailed)
	}
	usr, ok := x.users.Lookup(string(user))
	if !ok {
		return nil, true, fmt.Errorf("%w: unknown user", ErrAuthenticationFailed)
	}
	mech, c := ScramSHA256, usr.SHA256
	if c == nil {
		mech, c = ScramSHA512, usr.SHA512
	}
	if c == nil {
		return nil, true, fmt.Errorf("%w: the user has no SCRAM credential", ErrAuthenticationFailed)
	}
	cache := &x.users.plain
	tag := cache.tag(user, password)
	if cache.verified(tag, c) {
		x.user = usr
		return nil, true, nil
	}
	if x.gate != nil && !x.gate.Take() {
		return nil, true, fmt.Errorf("%w: %w", ErrAuthenticationFailed, ErrTooManyFailures)
	}
	cache.derivations.Add(1)
	if !c.verifyPassword(mech, string(password)) {
		return nil, true, fmt.Errorf("%w: bad password", ErrAuthenticationFailed)
	}
	if x.gate != nil {
		x.gate.Return()
	}
	cache.add(tag, c)
	x.user = usr
	return nil, true, nil
}

func (x *plainExchange) Principal() *Principal {
	if x.user == nil {
		return nil
	}
	return &x.user.Principal
}
