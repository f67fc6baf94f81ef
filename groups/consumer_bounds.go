package groups

import (
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"inlet/groups/validate"
	"inlet/wire"
)

// Bounds of KIP-848 consumer groups: what one client can make the coordinator hold and
// compute. Kafka bounds only a group's members (group.consumer.max.size, unbounded by
// default); the rest are Inlet's, so that a hostile client cannot grow memory or CPU without
// bound:
//
//   - members: group.consumer.max.size per group, and MaxMembersPerPrincipal over every
//     group (GROUP_MAX_SIZE_REACHED for both, as Kafka answers a full group);
//   - a member's strings: member, instance and rack ids of at most validate.MaxIDLength
//     bytes, at most MaxSubscribedTopics subscribed names of at most
//     validate.MaxTopicNameLength bytes each (INVALID_REQUEST; no topic can have a longer
//     name, Kafka's Topic.MAX_NAME_LENGTH), and the client id cut to validate.MaxIDLength;
//   - regular expressions: at most validate.MaxRegexLength bytes, compiling to at most
//     1,100 RE2 instructions (INVALID_REGULAR_EXPRESSION), and at most MaxRegexes distinct ones in a
//     group (INVALID_REQUEST);
//   - CPU per heartbeat: a regular expression is matched against the topic table once per
//     group, whichever members use it (regexEntry), again only when topics were created,
//     deleted or grew (Coordinator.TopicsChanged) or regexRefresh passed; the subscribed
//     names are looked up again only then, or when a subscription changed. A heartbeat that
//     changes nothing therefore costs no work proportional to the subscriptions (Kafka's
//     GroupMetadataManager likewise recomputes subscription metadata only on a new metadata
//     image, and resolves each regular expression once per group).
//
// The checks of one request's strings and expression are pure and live in package validate;
// what needs the group's or the coordinator's state is here. A member's principal is kept in
// its metadata record, so members restored at start-up count against their principal's bound.

// Defaults of the bounds above that are settings.
const (
	DefaultConsumerMaxMembersPerPrincipal = 5000
	DefaultConsumerMaxSubscribedTopics    = 256
	DefaultConsumerMaxRegexes             = 16
)

// setBoundDefaults fills the bounds left zero.
func (cc *ConsumerConfig) setBoundDefaults() {
	if cc.MaxMembersPerPrincipal == 0 {
		cc.MaxMembersPerPrincipal = DefaultConsumerMaxMembersPerPrincipal
	}
	if cc.MaxSubscribedTopics <= 0 {
		cc.MaxSubscribedTopics = DefaultConsumerMaxSubscribedTopics
	}
	if cc.MaxRegexes <= 0 {
		cc.MaxRegexes = DefaultConsumerMaxRegexes
	}
}

// regexEntry is one distinct regular expression of a group and the topics it matched, shared
// by the members that subscribe with it (users of them).
type regexEntry struct {
	re      *regexp.Regexp
	matched []string // topic names, sorted, before any principal's filter
	gen     uint64   // Coordinator.topicsGen when matched
	at      time.Time
	users   int
}

// regexFor returns the group's entry for the regular expression s, or a new one (compiled,
// the group's bound on distinct expressions checked) if no member uses it yet: useRegex
// keeps it. held is the regex the member gives up for it ("" none): when the member is its
// only user, it makes room.
func (g *group) regexFor(s, held string) (*regexEntry, int16, string) {
	cg := g.cg
	if e := cg.regexes[s]; e != nil {
		return e, wire.ErrNone, ""
	}
	n := len(cg.regexes)
	if e := cg.regexes[held]; e != nil && e.users == 1 {
		n--
	}
	if max := g.c.cfg.Consumer.MaxRegexes; n >= max {
		return nil, wire.ErrInvalidRequest, fmt.Sprintf("The consumer group uses %d distinct regular expressions (SubscribedTopicRegex), the most it may.", max)
	}
	re, code, msg := validate.Regex(s)
	if code != wire.ErrNone {
		return nil, code, msg
	}
	return &regexEntry{re: re}, wire.ErrNone, ""
}

// useRegex makes m subscribe with the regular expression s and its entry e (from regexFor;
// "" and nil: none), releasing its previous one, and matches it.
func (g *group) useRegex(m *consumerMember, s string, e *regexEntry) {
	g.releaseRegex(m.regex)
	m.regex, m.re, m.regexTopics = "", nil, nil
	if e != nil {
		g.keepRegex(s, e)
		m.regex, m.re = s, e.re
		m.regexTopics = g.matchRegex(m)
	}
}

// keepRegex takes a use of entry e of s.
func (g *group) keepRegex(s string, e *regexEntry) {
	if g.cg.regexes == nil {
		g.cg.regexes = map[string]*regexEntry{}
	}
	g.cg.regexes[s] = e
	e.users++
}

// releaseRegex gives back a use of s's entry, dropped with its last user.
func (g *group) releaseRegex(s string) {
	if s == "" {
		return
	}
	if e := g.cg.regexes[s]; e != nil {
		if e.users--; e.users <= 0 {
			delete(g.cg.regexes, s)
		}
	}
}

// regexMatches is what the group's entry for m's regular expression matches, matched again
// if topics changed since or regexRefresh passed.
func (g *group) regexMatches(m *consumerMember) []string {
	e := g.cg.regexes[m.regex]
	if e == nil {
		panic("BUG: groups: a member's regular expression has no entry in its group")
	}
	gen, now := g.c.topicsGen.Load(), time.Now()
	if e.at.IsZero() || gen != e.gen || now.Sub(e.at) >= regexRefresh {
		e.gen, e.at, e.matched = gen, now, e.matched[:0]
		if g.c.cfg.Consumer.Topics != nil {
			for _, t := range g.c.cfg.Consumer.Topics() {
				if e.re.MatchString(t.Name) {
					e.matched = append(e.matched, t.Name)
				}
			}
			slices.Sort(e.matched)
		}
	}
	return e.matched
}

// principalMembers counts the KIP-848 members of each principal over every group
// (ConsumerConfig.MaxMembersPerPrincipal). Its mutex is a leaf: taken under a group's.
type principalMembers struct {
	mu sync.Mutex
	n  map[string]int
}

// admitMember counts one more member of principal p, unless p holds the bound.
func (c *Coordinator) admitMember(p string) bool {
	max := c.cfg.Consumer.MaxMembersPerPrincipal
	pm := &c.consumerMembers
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if max > 0 && pm.n[p] >= max {
		return false
	}
	if pm.n == nil {
		pm.n = map[string]int{}
	}
	pm.n[p]++
	return true
}

// countMember counts a member of p whatever the bound: one restored at start-up, or a
// static member's new instance taking over its previous one's place.
func (c *Coordinator) countMember(p string) {
	pm := &c.consumerMembers
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.n == nil {
		pm.n = map[string]int{}
	}
	pm.n[p]++
}

// releaseMember counts one member of p less.
func (c *Coordinator) releaseMember(p string) {
	pm := &c.consumerMembers
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.n[p]--; pm.n[p] <= 0 {
		delete(pm.n, p)
	}
}

// MembersOf is how many KIP-848 members principal p holds over every group.
func (c *Coordinator) MembersOf(p string) int {
	pm := &c.consumerMembers
	pm.mu.Lock()
	defer pm.mu.Unlock()
	return pm.n[p]
}
