// Package tenants keeps what the admin APIs change at run time — ACL bindings, users' SCRAM
// credentials and quotas — durably, on top of the config file, which stays the starting
// point: the bindings in force are the file's (its users' prefixes, as PREFIXED ALLOW ALL
// bindings: PrefixBindings) minus those deleted plus those created, credentials and quotas the
// file's overridden one by one.
//
// Files written before ACLs kept per-user prefix changes (State.Prefixes); MigratePrefixes
// turns them into the bindings they stood for, once, at start-up.
//
// The changes live in one small JSON file in the data directory, replaced whole on every
// change by writing a temporary file, syncing it, renaming it over the old one and syncing
// the directory, so after a crash the file holds either every change acknowledged or the
// state before the last one, never a torn mix. Changes are rare (an operator's), so a file
// written whole is simpler than log entries and costs nothing that matters.
package tenants

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"inlet/acl"
	"inlet/auth"
	"inlet/quota"
	"inlet/segfs"
)

// Kind is the kind of name a prefix scopes.
type Kind string

const (
	Topic           Kind = "topic"
	Group           Kind = "group"
	TransactionalID Kind = "transactional_id"
)

// Delta is the prefixes added to and removed from one kind of a user's prefixes.
type Delta struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

// CredentialChange replaces a user's credential for one mechanism, or deletes it.
type CredentialChange struct {
	Credential *auth.Credential `json:"credential,omitempty"`
	Deleted    bool             `json:"deleted,omitempty"`
}

// State is every change made at run time.
type State struct {
	// ACLs are the bindings created at run time that the config file does not give.
	ACLs []acl.Binding `json:"acls,omitempty"`
	// RemovedACLs are bindings of the config file deleted at run time.
	RemovedACLs []acl.Binding `json:"removed_acls,omitempty"`
	// Prefixes by user and kind: the changes of files written before ACLs, read only to be
	// migrated (MigratePrefixes); nil after.
	Prefixes map[string]map[Kind]*Delta `json:"prefixes,omitempty"`
	// Credentials by user and mechanism (auth.ScramSHA256, auth.ScramSHA512).
	Credentials map[string]map[string]*CredentialChange `json:"credentials,omitempty"`
	// Quotas by entity (quota.EntityKey: a user or quota.DefaultUser alone by its name, an
	// entity with a client id joined by a NUL byte) and key; a nil value removes the config
	// file's.
	Quotas map[string]map[string]*float64 `json:"quotas,omitempty"`
}

// SetQuota records a quota for entity and key (nil: removed); it reports whether that
// changed the quotas in force over base (the config file's).
func (st *State) SetQuota(entity, key string, v *float64, base quota.Bounds) bool {
	before := ApplyQuotas(base, st)
	if st.Quotas == nil {
		st.Quotas = map[string]map[string]*float64{}
	}
	if st.Quotas[entity] == nil {
		st.Quotas[entity] = map[string]*float64{}
	}
	st.Quotas[entity][key] = v
	after := ApplyQuotas(base, st)
	old, hadOld := before[entity][key]
	now, hasNow := after[entity][key]
	return hadOld != hasNow || old != now
}

// ApplyQuotas returns the quotas in force: base (the config file's) with st's changes; a new
// table.
func ApplyQuotas(base quota.Bounds, st *State) quota.Bounds {
	out := quota.Bounds{}
	for e, keys := range base {
		for k, v := range keys {
			out.Put(e, k, v)
		}
	}
	for e, keys := range st.Quotas {
		for k, v := range keys {
			if v == nil {
				delete(out[e], k)
				if len(out[e]) == 0 {
					delete(out, e)
				}
				continue
			}
			out.Put(e, k, *v)
		}
	}
	return out
}

// AddPrefix records that user may use names of kind under prefix; it reports whether that
// changed anything.
func (st *State) AddPrefix(user string, kind Kind, prefix string, base []string) bool {
	d := st.delta(user, kind)
	if i := slices.Index(d.Removed, prefix); i >= 0 {
		d.Removed = slices.Delete(d.Removed, i, i+1)
		return true
	}
	if slices.Contains(base, prefix) || slices.Contains(d.Added, prefix) {
		return false
	}
	d.Added = append(d.Added, prefix)
	return true
}

// RemovePrefix records that user may no longer use prefix of kind; it reports whether that
// changed anything.
func (st *State) RemovePrefix(user string, kind Kind, prefix string, base []string) bool {
	d := st.delta(user, kind)
	if i := slices.Index(d.Added, prefix); i >= 0 {
		d.Added = slices.Delete(d.Added, i, i+1)
		return true
	}
	if !slices.Contains(base, prefix) || slices.Contains(d.Removed, prefix) {
		return false
	}
	d.Removed = append(d.Removed, prefix)
	return true
}

func (st *State) delta(user string, kind Kind) *Delta {
	if st.Prefixes == nil {
		st.Prefixes = map[string]map[Kind]*Delta{}
	}
	if st.Prefixes[user] == nil {
		st.Prefixes[user] = map[Kind]*Delta{}
	}
	d := st.Prefixes[user][kind]
	if d == nil {
		d = &Delta{}
		st.Prefixes[user][kind] = d
	}
	return d
}

// SetCredential records a credential change for user and mechanism.
func (st *State) SetCredential(user, mechanism string, c CredentialChange) {
	if st.Credentials == nil {
		st.Credentials = map[string]map[string]*CredentialChange{}
	}
	if st.Credentials[user] == nil {
		st.Credentials[user] = map[string]*CredentialChange{}
	}
	st.Credentials[user][mechanism] = &c
}

// Apply returns the users in force: base (the config file's) with st's changes. A user that
// had SCRAM credentials and has none left is deleted; one that st gives credentials is
// created if base lacks it, with no prefixes of its own.
func Apply(base []*auth.User, st *State) []auth.User {
	byName := map[string]auth.User{}
	hadCreds := map[string]bool{}
	for _, u := range base {
		byName[u.Name] = *u
		hadCreds[u.Name] = u.SHA256 != nil || u.SHA512 != nil
	}
	for name, changes := range st.Credentials {
		u, ok := byName[name]
		if !ok {
			u = auth.User{Principal: auth.Principal{Name: name}}
		}
		for mech, c := range changes {
			var cred *auth.Credential
			if !c.Deleted && c.Credential != nil {
				cc := *c.Credential
				cred = &cc
			}
			switch mech {
			case auth.ScramSHA256:
				u.SHA256 = cred
			case auth.ScramSHA512:
				u.SHA512 = cred
			}
		}
		if u.SHA256 == nil && u.SHA512 == nil && (ok && hadCreds[name] || !ok) {
			delete(byName, name)
			continue
		}
		byName[name] = u
	}
	for name, kinds := range st.Prefixes {
		u, ok := byName[name]
		if !ok {
			continue // the changes stay recorded for a user that may come back
		}
		u.Principal = applyPrefixes(u.Principal, kinds)
		byName[name] = u
	}
	out := make([]auth.User, 0, len(byName))
	for _, u := range byName {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b auth.User) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// applyPrefixes is p with the prefix changes of kinds (files before ACLs). Each kind's
// changes apply to the file's list of that kind. Groups and transactional ids that follow
// the topic prefixes keep following them (the changed ones included) until changes of their
// own make their list explicit.
func applyPrefixes(p auth.Principal, kinds map[Kind]*Delta) auth.Principal {
	orig := p
	if d := kinds[Topic]; d != nil {
		p.TopicPrefixes = d.apply(orig.TopicPrefixes)
	}
	if d := kinds[Group]; d != nil {
		p.GroupPrefixes, p.GroupsExplicit = d.apply(orig.Groups()), true
	}
	if d := kinds[TransactionalID]; d != nil {
		p.TransactionalIDPrefixes, p.TransactionalIDsExplicit = d.apply(orig.TransactionalIDs()), true
	}
	return p
}

// PrefixBindings are the ACL bindings p's prefixes stand for (the config file's shorthand):
// one PREFIXED ALLOW ALL binding from any host per prefix of topics, groups and
// transactional ids ("" and "*" being the LITERAL wildcard "*").
func PrefixBindings(p *auth.Principal) []acl.Binding {
	var out []acl.Binding
	add := func(rt acl.ResourceType, prefixes []string) {
		for _, pre := range prefixes {
			b := acl.Binding{ResourceType: rt, Name: pre, Pattern: acl.Prefixed, Principal: "User:" + p.Name, Host: acl.Wildcard, Operation: acl.All, Permission: acl.Allow}
			if pre == "" || pre == acl.Wildcard {
				b.Name, b.Pattern = acl.Wildcard, acl.Literal
			}
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	add(acl.Topic, p.TopicPrefixes)
	add(acl.Group, p.Groups())
	add(acl.TransactionalID, p.TransactionalIDs())
	return out
}

// MigratePrefixes turns the prefix changes of a file written before ACLs into bindings: for
// each user, the bindings of its prefixes as they were in force (the file's users, base, with
// the changes) that the file does not give are created, and those of the file that the
// changes removed are deleted; the prefix changes are then dropped. It reports whether there
// was anything to migrate.
func (st *State) MigratePrefixes(base []*auth.User) bool {
	if st.Prefixes == nil {
		return false
	}
	users := map[string]auth.Principal{}
	for _, u := range base {
		users[u.Name] = u.Principal
	}
	names := make([]string, 0, len(st.Prefixes))
	for name := range st.Prefixes {
		names = append(names, name)
	}
	slices.Sort(names) // the same file migrates to the same bindings
	for _, name := range names {
		before, ok := users[name]
		if !ok {
			before = auth.Principal{Name: name}
		}
		after := applyPrefixes(before, st.Prefixes[name])
		was, is := PrefixBindings(&before), PrefixBindings(&after)
		for _, b := range is {
			if !slices.Contains(was, b) && !slices.Contains(st.ACLs, b) {
				st.ACLs = append(st.ACLs, b)
			}
		}
		for _, b := range was {
			if !slices.Contains(is, b) && !slices.Contains(st.RemovedACLs, b) {
				st.RemovedACLs = append(st.RemovedACLs, b)
			}
		}
	}
	st.Prefixes = nil
	return true
}

// AddACL records binding b as created; file are the config file's bindings. It reports
// whether that changed the bindings in force.
func (st *State) AddACL(b acl.Binding, file []acl.Binding) bool {
	if i := slices.Index(st.RemovedACLs, b); i >= 0 {
		st.RemovedACLs = slices.Delete(st.RemovedACLs, i, i+1)
		return true
	}
	if slices.Contains(file, b) || slices.Contains(st.ACLs, b) {
		return false
	}
	st.ACLs = append(st.ACLs, b)
	return true
}

// RemoveACL records binding b as deleted; it reports whether that changed the bindings in
// force.
func (st *State) RemoveACL(b acl.Binding, file []acl.Binding) bool {
	if i := slices.Index(st.ACLs, b); i >= 0 {
		st.ACLs = slices.Delete(st.ACLs, i, i+1)
		return true
	}
	if !slices.Contains(file, b) || slices.Contains(st.RemovedACLs, b) {
		return false
	}
	st.RemovedACLs = append(st.RemovedACLs, b)
	return true
}

// Bindings are the bindings in force: file's, less those deleted, and those created; a new
// slice.
func (st *State) Bindings(file []acl.Binding) []acl.Binding {
	removed := make(map[acl.Binding]bool, len(st.RemovedACLs))
	for _, b := range st.RemovedACLs {
		removed[b] = true
	}
	out := make([]acl.Binding, 0, len(file)+len(st.ACLs))
	in := make(map[acl.Binding]bool, len(file)+len(st.ACLs))
	for _, b := range file {
		if !removed[b] && !in[b] {
			in[b] = true
			out = append(out, b)
		}
	}
	for _, b := range st.ACLs {
		if !in[b] {
			in[b] = true
			out = append(out, b)
		}
	}
	return out
}

// apply is (base ∪ Added) \ Removed, in base's order then Added's; a new slice.
func (d *Delta) apply(base []string) []string {
	out := []string{} // never nil: an explicit empty list means none
	for _, p := range base {
		if !slices.Contains(d.Removed, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range d.Added {
		if !slices.Contains(d.Removed, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// FileName is the state's file in the data directory.
const FileName = "tenants.json"

// Store is the durable State.
type Store struct {
	path string
	mu   sync.Mutex
	st   State
}

// Open loads the state at path (none yet: empty).
func Open(path string) (*Store, error) {
	s := &Store{path: path}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("tenants: %w", err)
	}
	if err := json.Unmarshal(b, &s.st); err != nil {
		return nil, fmt.Errorf("tenants: %s: %w", path, err)
	}
	return s, nil
}

// State returns a copy of the state.
func (s *Store) State() *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.clone()
}

// Change applies change to a copy of the state and makes the result durable; only then is it
// the state. change returns whether it changed anything (nothing to write otherwise).
func (s *Store) Change(change func(st *State) (bool, error)) (*State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.st.clone()
	changed, err := change(next)
	if err != nil || !changed {
		return s.st.clone(), err
	}
	if err := s.write(next); err != nil {
		return s.st.clone(), err
	}
	s.st = *next
	return next.clone(), nil
}

func (s *Store) write(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := segfs.MkdirAllSynced(segfs.OS, dir); err != nil {
		return fmt.Errorf("tenants: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tenants-*.json")
	if err != nil {
		return fmt.Errorf("tenants: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing by that name
	if _, err = tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err == nil {
		err = segfs.OS.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("tenants: write %s: %w", s.path, err)
	}
	return nil
}

func (st *State) clone() *State {
	b, err := json.Marshal(st)
	if err != nil {
		panic("BUG: tenants: state does not marshal: " + err.Error())
	}
	var out State
	if err := json.Unmarshal(b, &out); err != nil {
		panic("BUG: tenants: state does not unmarshal: " + err.Error())
	}
	return &out
}
