// Package tenants keeps what the admin APIs change about users at run time — the prefixes
// that scope them (shown and managed as Kafka ACLs), their SCRAM credentials and their
// quotas — durably, on top of the config file, which stays the starting point: a user's
// prefixes are the file's plus those added minus those removed, its credentials and quotas
// the file's overridden one by one.
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
	// Prefixes by user and kind.
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
		// Each kind's changes apply to the file's list of that kind. Groups and transactional
		// ids that follow the topic prefixes keep following them (the changed ones included)
		// until changes of their own make their list explicit.
		orig := u
		if d := kinds[Topic]; d != nil {
			u.TopicPrefixes = d.apply(orig.TopicPrefixes)
		}
		if d := kinds[Group]; d != nil {
			u.GroupPrefixes, u.GroupsExplicit = d.apply(orig.Groups()), true
		}
		if d := kinds[TransactionalID]; d != nil {
			u.TransactionalIDPrefixes, u.TransactionalIDsExplicit = d.apply(orig.TransactionalIDs()), true
		}
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
