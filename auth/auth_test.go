package auth

import (
	"bytes"
	"errors"
	"testing"

	"github.com/xdg-go/scram"
)

func testUsers(t testing.TB) *Users {
	t.Helper()
	var us []User
	for _, u := range []struct{ name, pw, prefix string }{{"alice", "alice-secret", "alice."}, {"bob", "bob-secret", "bob."}} {
		c256, err := NewCredential(ScramSHA256, u.pw, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		c512, err := NewCredential(ScramSHA512, u.pw, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, User{Principal: Principal{Name: u.name, TopicPrefixes: []string{u.prefix}}, SHA256: &c256, SHA512: &c512})
	}
	users, err := NewUsers(us)
	if err != nil {
		t.Fatal(err)
	}
	return users
}

func TestPlainGoodAndBad(t *testing.T) {
	u := testUsers(t)
	for _, tc := range []struct {
		name string
		msg  string
		ok   bool
	}{
		{"good", "\x00alice\x00alice-secret", true},
		{"good with authzid", "alice\x00alice\x00alice-secret", true},
		{"wrong password", "\x00alice\x00bob-secret", false},
		{"unknown user", "\x00carol\x00alice-secret", false},
		{"other authzid", "bob\x00alice\x00alice-secret", false},
		{"one separator", "alice\x00alice-secret", false},
		{"empty password", "\x00alice\x00", false},
		{"three separators", "\x00alice\x00alice-secret\x00", false},
	} {
		x, err := u.Start(Plain)
		if err != nil {
			t.Fatal(err)
		}
		_, done, err := x.Step([]byte(tc.msg))
		if !done {
			t.Errorf("%s: PLAIN not done after one step", tc.name)
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s: err %v does not wrap ErrAuthenticationFailed", tc.name, err)
		}
		if tc.ok && (x.Principal() == nil || x.Principal().Name != "alice") {
			t.Errorf("%s: principal %+v", tc.name, x.Principal())
		}
		if !tc.ok && x.Principal() != nil {
			t.Errorf("%s: failed exchange has a principal", tc.name)
		}
	}
}

// TestScramAgainstXdgClient runs the server exchange against an independent RFC 5802 client.
func TestScramAgainstXdgClient(t *testing.T) {
	u := testUsers(t)
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		for _, tc := range []struct {
			user, pw string
			ok       bool
		}{{"alice", "alice-secret", true}, {"alice", "wrong", false}, {"nobody", "alice-secret", false}} {
			hg := scram.SHA256
			if mech == ScramSHA512 {
				hg = scram.SHA512
			}
			cl, err := hg.NewClient(tc.user, tc.pw, "")
			if err != nil {
				t.Fatal(err)
			}
			conv := cl.NewConversation()
			x, err := u.Start(mech)
			if err != nil {
				t.Fatal(err)
			}
			c1, _ := conv.Step("")
			s1, done, err := x.Step([]byte(c1))
			if err != nil || done {
				if tc.ok {
					t.Fatalf("%s %s: first step: done=%v err=%v", mech, tc.user, done, err)
				}
				continue
			}
			c2, err := conv.Step(string(s1))
			if err != nil {
				t.Fatal(err)
			}
			s2, done, err := x.Step([]byte(c2))
			if !done {
				t.Fatalf("%s: not done after client-final", mech)
			}
			if (err == nil) != tc.ok {
				t.Fatalf("%s %s/%s: err %v, want ok=%v", mech, tc.user, tc.pw, err, tc.ok)
			}
			if tc.ok {
				if _, err := conv.Step(string(s2)); err != nil {
					t.Fatalf("%s: client rejects the server signature: %v", mech, err)
				}
				if p := x.Principal(); p == nil || p.Name != "alice" {
					t.Fatalf("principal %+v", p)
				}
			}
		}
	}
}

func TestScramRejectsTokenAuth(t *testing.T) {
	u := testUsers(t)
	x, _ := u.Start(ScramSHA256)
	if _, _, err := x.Step([]byte("n,,n=alice,r=abc,tokenauth=true")); err == nil {
		t.Fatal("tokenauth exchange accepted")
	}
}

func TestUnknownMechanism(t *testing.T) {
	if _, err := testUsers(t).Start("GSSAPI"); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("err %v", err)
	}
}

func TestPrincipalPrefixes(t *testing.T) {
	p := &Principal{Name: "alice", TopicPrefixes: []string{"alice."}}
	for name, want := range map[string]bool{"alice.orders": true, "alice.": true, "alice": false, "bob.orders": false, "": false} {
		if got := p.AllowsTopic([]byte(name)); got != want {
			t.Errorf("AllowsTopic(%q) = %v", name, got)
		}
		if got := p.AllowsTopicString(name); got != want {
			t.Errorf("AllowsTopicString(%q) = %v", name, got)
		}
	}
	var unrestricted *Principal
	if !unrestricted.AllowsTopic([]byte("anything")) || !unrestricted.AllowsGroup("g") {
		t.Error("nil principal is restricted")
	}
	if (&Principal{}).AllowsTopic([]byte("x")) {
		t.Error("principal without prefixes may use a topic")
	}
	if !(&Principal{TopicPrefixes: []string{"*"}}).AllowsTopic([]byte("x")) {
		t.Error("prefix * does not allow everything")
	}
	if n := testing.AllocsPerRun(100, func() { p.AllowsTopic([]byte("alice.orders")) }); n != 0 {
		t.Errorf("AllowsTopic allocates %v", n)
	}
}

func TestDeriveCredentialKnownAnswer(t *testing.T) {
	// RFC 7677 section 3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==,
	// 4096 iterations; ServerSignature checks out only if StoredKey/ServerKey are right, so
	// check the derivation against xdg-go's client instead.
	salt := []byte("0123456789abcdef")
	c, err := DeriveCredential(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := scram.SHA256.NewClient("user", "pencil", "")
	sc := cl.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: 4096})
	if !bytes.Equal(sc.StoredKey, c.StoredKey) || !bytes.Equal(sc.ServerKey, c.ServerKey) {
		t.Fatal("credential differs from xdg-go's derivation")
	}
}
