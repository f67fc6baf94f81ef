// Package auth holds Inlet's principals, their topic prefixes, the users' SCRAM
// credentials, and the server side of the SASL mechanisms PLAIN (RFC 4616) and
// SCRAM-SHA-256/512 (RFC 5802, RFC 7677; Kafka's KIP-84).
//
// Passwords are never kept: a user's password (read from a file or an environment variable
// at start-up) is turned into SCRAM credentials (salt, iteration count, StoredKey, ServerKey)
// at once, and PLAIN is verified against those credentials by deriving the StoredKey from the
// offered password. Nothing here logs a password or a credential.
package auth

import (
	"bytes"
	"errors"
	"strings"
)

// Mechanism names as Kafka spells them (SaslHandshake).
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Mechanisms lists every mechanism this package serves, in the order advertised.
var Mechanisms = []string{ScramSHA512, ScramSHA256, Plain}

// KnownMechanism reports whether m is a mechanism this package serves.
func KnownMechanism(m string) bool {
	for _, k := range Mechanisms {
		if k == m {
			return true
		}
	}
	return false
}

// Principal is who a connection acts as, and the prefixes its config file gives it. The
// prefixes are the shorthand of ACL bindings (tenants.PrefixBindings): the server authorizes
// through the ACLs in force (package acl), not through the Allows methods here, which say
// what the prefixes alone allow. A nil *Principal is unrestricted (a listener without
// security settings): every method answers true for it.
type Principal struct {
	Name string
	// TopicPrefixes: topics the principal may use every operation on (PREFIXED ALLOW ALL).
	// Empty means none; a prefix "" or "*" is every topic (the LITERAL wildcard).
	TopicPrefixes []string
	// GroupPrefixes scope consumer groups; empty means the topic prefixes apply to groups too,
	// unless GroupsExplicit is set (the list was set at run time, and empty means none).
	GroupPrefixes []string
	// TransactionalIDPrefixes scope transactional ids; empty means the topic prefixes apply,
	// unless TransactionalIDsExplicit is set.
	TransactionalIDPrefixes []string

	GroupsExplicit, TransactionalIDsExplicit bool
}

// Groups returns the group prefixes in force: GroupPrefixes, or the topic prefixes when the
// principal has no group prefixes of its own.
func (p *Principal) Groups() []string {
	if len(p.GroupPrefixes) == 0 && !p.GroupsExplicit {
		return p.TopicPrefixes
	}
	return p.GroupPrefixes
}

// TransactionalIDs returns the transactional-id prefixes in force (see Groups).
func (p *Principal) TransactionalIDs() []string {
	if len(p.TransactionalIDPrefixes) == 0 && !p.TransactionalIDsExplicit {
		return p.TopicPrefixes
	}
	return p.TransactionalIDPrefixes
}

// AllowsTopic reports whether p may use topic name. It does not allocate.
func (p *Principal) AllowsTopic(name []byte) bool {
	if p == nil {
		return true
	}
	return matchPrefix(p.TopicPrefixes, name)
}

// AllowsTopicString is AllowsTopic for a string.
func (p *Principal) AllowsTopicString(name string) bool {
	if p == nil {
		return true
	}
	for _, pre := range p.TopicPrefixes {
		if pre == "" || pre == "*" || strings.HasPrefix(name, pre) {
			return true
		}
	}
	return false
}

// AllowsGroup reports whether p may use consumer group id.
func (p *Principal) AllowsGroup(id string) bool {
	if p == nil {
		return true
	}
	return matchPrefix(p.Groups(), []byte(id))
}

// AllowsTransactionalID reports whether p may use transactional id.
func (p *Principal) AllowsTransactionalID(id string) bool {
	if p == nil {
		return true
	}
	return matchPrefix(p.TransactionalIDs(), []byte(id))
}

func matchPrefix(prefixes []string, name []byte) bool {
	for _, pre := range prefixes {
		if pre == "" || pre == "*" || bytes.HasPrefix(name, []byte(pre)) {
			return true
		}
	}
	return false
}

// ErrAuthenticationFailed is the one error a failed exchange reports to the client, whatever
// the reason (unknown user, wrong password, malformed message): telling them apart would
// let a client enumerate users. The reason goes to the broker's log at debug level only.
var ErrAuthenticationFailed = errors.New("Authentication failed: Invalid username or password")

// ErrUnsupportedMechanism is returned by Users.Start for a mechanism not served.
var ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")
