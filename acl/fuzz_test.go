package acl

import (
	"strings"
	"testing"
)

// FuzzAuthorize: for any one binding and request, Authorize never panics and agrees with the
// rules spelled out directly: a DENY that applies refuses, else an ALLOW that applies and
// implies the operation allows; adding a DENY of the same shape never turns a refusal into
// an allowance; a super user is always allowed.
func FuzzAuthorize(f *testing.F) {
	f.Add(uint8(2), uint8(4), "cdc.", "alice", "*", uint8(3), true, "cdc.x", "alice", "h", uint8(8))
	f.Add(uint8(2), uint8(3), "*", "*", "10.0.0.1", uint8(2), false, "t", "bob", "10.0.0.1", uint8(4))
	f.Fuzz(func(t *testing.T, rt, pat uint8, name, user, host string, op uint8, isAllow bool, resource, reqUser, reqHost string, reqOp uint8) {
		b := Binding{ResourceType(rt%7 + 1), name, PatternType(pat%2 + 3), "User:" + user, host, Operation(op%13 + 2), Deny}
		if isAllow {
			b.Permission = Allow
		}
		rop := Operation(reqOp%12 + 3) // never ALL or ANY: not asked for
		rtype := ResourceType(rt%7 + 1)
		a := New([]Binding{b}, nil, false)
		got := a.Authorize("User:"+reqUser, reqHost, rtype, resource, rop)
		nameMatches := b.Pattern == Literal && (b.Name == resource || b.Name == Wildcard) || b.Pattern == Prefixed && strings.HasPrefix(resource, b.Name)
		applies := nameMatches && (user == reqUser || user == "*") && (host == "*" || host == reqHost)
		want := applies && b.Permission == Allow && implies(b.Operation, rop)
		if got != want {
			t.Fatalf("Authorize(%q %q %v %q %v) over %v = %v, want %v", reqUser, reqHost, rtype, resource, rop, b, got, want)
		}
		d := b
		d.Permission = Deny
		if !got && New([]Binding{b, d}, nil, false).Authorize("User:"+reqUser, reqHost, rtype, resource, rop) {
			t.Fatal("a DENY turned a refusal into an allowance")
		}
		if !New([]Binding{d}, []string{"User:" + reqUser}, false).Authorize("User:"+reqUser, reqHost, rtype, resource, rop) {
			t.Fatal("a super user was refused")
		}
	})
}
