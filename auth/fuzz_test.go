package auth

import (
	"bytes"
	"testing"
)

// FuzzParsePlain: ParsePlain never panics; when it accepts, the three parts joined with NUL
// are the input, the user and password are non-empty and no part contains NUL.
func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00pw", "a\x00b\x00c", "", "\x00", "\x00\x00", "x\x00y\x00z\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		a, u, p, err := ParsePlain(msg)
		if err != nil {
			return
		}
		if len(u) == 0 || len(p) == 0 {
			t.Fatal("accepted an empty user or password")
		}
		for _, part := range [][]byte{a, u, p} {
			if bytes.IndexByte(part, 0) >= 0 {
				t.Fatal("part contains NUL")
			}
		}
		if !bytes.Equal(bytes.Join([][]byte{a, u, p}, []byte{0}), msg) {
			t.Fatal("parts do not re-join to the input")
		}
	})
}

// FuzzScramExchange: the server side of SCRAM never panics on arbitrary client-first and
// client-final messages, and never authenticates a client that did not prove the password
// (a random client-final cannot carry a valid proof).
func FuzzScramExchange(f *testing.F) {
	users := testUsers(f)
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"), false)
	f.Add([]byte("n,,n=alice,r=abc,tokenauth=true"), []byte(""), true)
	f.Add([]byte("y,a=bob,n=bob,r="), []byte("c=,r=,p="), true)
	f.Add([]byte("p=tls-unique,,n=alice,r=x"), []byte(",,,"), false)
	f.Add([]byte("n,,n=al=2Cice,r=x"), []byte("c=biws"), false)
	f.Fuzz(func(t *testing.T, first, final []byte, sha512 bool) {
		mech := ScramSHA256
		if sha512 {
			mech = ScramSHA512
		}
		x, err := users.Start(mech)
		if err != nil {
			t.Fatal(err)
		}
		if _, done, err := x.Step(first); err != nil || done {
			return
		}
		if _, _, err := x.Step(final); err == nil {
			t.Fatalf("authenticated without a proof: %q / %q", first, final)
		}
		if x.Principal() != nil {
			t.Fatal("failed exchange has a principal")
		}
	})
}
