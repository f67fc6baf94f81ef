package tenants

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"inlet/auth"
)

func cred(t *testing.T, mech, pw string) *auth.Credential {
	c, err := auth.DeriveCredential(mech, pw, []byte("salt"), auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestApplyIsTheFileWithTheChanges: prefixes are the file's plus those added minus those
// removed, per kind; a group list derived from the topic prefixes becomes explicit when
// changed (and may become empty: none); credentials are overridden per mechanism; a user
// whose last credential is deleted is gone, one given credentials is created.
func TestApplyIsTheFileWithTheChanges(t *testing.T) {
	alice := &auth.User{Principal: auth.Principal{Name: "alice", TopicPrefixes: []string{"alice."}}, SHA256: cred(t, auth.ScramSHA256, "a")}
	bob := &auth.User{Principal: auth.Principal{Name: "bob", TopicPrefixes: []string{"bob."}}, SHA512: cred(t, auth.ScramSHA512, "b")}
	base := []*auth.User{alice, bob}
	var st State
	if !st.AddPrefix("alice", Topic, "shared.", alice.TopicPrefixes) || st.AddPrefix("alice", Topic, "shared.", alice.TopicPrefixes) {
		t.Fatal("adding a prefix twice: want a change once")
	}
	if st.AddPrefix("alice", Topic, "alice.", alice.TopicPrefixes) {
		t.Fatal("adding a prefix the file gives: no change wanted")
	}
	st.RemovePrefix("alice", Group, "alice.", alice.Groups())
	st.SetCredential("bob", auth.ScramSHA512, CredentialChange{Deleted: true})
	st.SetCredential("carol", auth.ScramSHA256, CredentialChange{Credential: cred(t, auth.ScramSHA256, "c")})
	st.AddPrefix("carol", Topic, "carol.", nil)

	got := Apply(base, &st)
	if len(got) != 2 || got[0].Name != "alice" || got[1].Name != "carol" {
		t.Fatalf("users %v, want alice and carol (bob deleted)", got)
	}
	a := got[0]
	if !slices.Equal(a.TopicPrefixes, []string{"alice.", "shared."}) || !a.GroupsExplicit || len(a.GroupPrefixes) != 0 || a.AllowsGroup("alice.g") {
		t.Errorf("alice: topics %v, groups %v (explicit %v)", a.TopicPrefixes, a.GroupPrefixes, a.GroupsExplicit)
	}
	if !a.AllowsTransactionalID("alice.tx") || !a.AllowsTransactionalID("shared.tx") {
		t.Errorf("alice's transactional ids follow her topic prefixes: %v", a.TransactionalIDs())
	}
	if c := got[1]; c.SHA256 == nil || !slices.Equal(c.TopicPrefixes, []string{"carol."}) {
		t.Errorf("carol: %+v", c)
	}
	if alice.TopicPrefixes[0] != "alice." || len(alice.TopicPrefixes) != 1 {
		t.Error("Apply changed a base user")
	}
}

// TestStoreIsDurable: a change is on disk when Change returns, and a store opened later
// holds it.
func TestStoreIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenants.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Change(func(st *State) (bool, error) {
		return st.AddPrefix("alice", Topic, "x.", nil), nil
	}); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := again.State().Prefixes["alice"][Topic]; d == nil || !slices.Equal(d.Added, []string{"x."}) {
		t.Fatalf("reopened state: %+v", again.State())
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".tenants-*")); len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// TestMigratePrefixesOfAnOlderFile: a tenants.json written before ACLs (per-user prefix
// changes) opens as the bindings those prefixes stood for: added prefixes are created
// bindings (groups and transactional ids following the topic prefixes get theirs too),
// removed file prefixes deleted bindings; the bindings in force are what the prefixes
// allowed, and credentials are untouched.
func TestMigratePrefixesOfAnOlderFile(t *testing.T) {
	// As the code before ACLs wrote it: alice got shared. (topics, so groups and ids too) and
	// lost her file group prefix alice.; carol (no file user) got carol. for topics.
	old := `{
  "prefixes": {
    "alice": {
      "topic": {"added": ["shared."]},
      "group": {"added": ["shared."], "removed": ["alice."]}
    },
    "carol": {"topic": {"added": ["carol."]}}
  },
  "credentials": {"carol": {"SCRAM-SHA-256": {"deleted": true}}}
}`
	path := filepath.Join(t.TempDir(), "tenants.json")
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	alice := &auth.User{Principal: auth.Principal{Name: "alice", TopicPrefixes: []string{"alice."}}}
	base := []*auth.User{alice}
	file := PrefixBindings(&alice.Principal)
	st, err := s.Change(func(st *State) (bool, error) { return st.MigratePrefixes(base), nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.Prefixes != nil || st.Credentials["carol"] == nil {
		t.Fatalf("after migration: prefixes %v, credentials %v", st.Prefixes, st.Credentials)
	}
	got := map[string]bool{}
	for _, b := range st.Bindings(file) {
		got[b.ResourceType.String()+" "+b.Pattern.String()+" "+b.Name+" "+b.Principal] = true
	}
	want := map[string]bool{
		"TOPIC PREFIXED alice. User:alice": true, "TOPIC PREFIXED shared. User:alice": true,
		"GROUP PREFIXED shared. User:alice":            true,
		"TRANSACTIONAL_ID PREFIXED alice. User:alice":  true,
		"TRANSACTIONAL_ID PREFIXED shared. User:alice": true,
		"TOPIC PREFIXED carol. User:carol":             true, "GROUP PREFIXED carol. User:carol": true,
		"TRANSACTIONAL_ID PREFIXED carol. User:carol": true,
	}
	if !maps.Equal(got, want) {
		t.Errorf("bindings after migration:\n got %v\nwant %v", got, want)
	}
	// The migrated file is written as bindings and reopens the same, with nothing left to migrate.
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if st2 := s2.State(); st2.Prefixes != nil || len(st2.ACLs) != len(st.ACLs) || st2.MigratePrefixes(base) {
		t.Errorf("reopened: %+v", st2)
	}
}
