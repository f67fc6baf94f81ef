package server

import "testing"

// TestEveryAPIDeclaresAuthorization: an API registered without saying what it checks (the
// resource types and operations, and whether a filter or its handler applies them), or why
// it checks nothing, fails here; so does a declaration with checks and neither a filter nor
// the handler to apply them.
func TestEveryAPIDeclaresAuthorization(t *testing.T) {
	if len(apis) < 40 {
		t.Fatalf("only %d APIs registered", len(apis))
	}
	for key, a := range apis {
		if !a.authz.Declared() {
			t.Errorf("api key %d: authorization not declared (authz: before, inHandler or unchecked): %+v", key, a.authz)
		}
	}
}
