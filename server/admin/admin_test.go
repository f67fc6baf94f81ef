package admin

import "testing"

// TestAPIsAreDeclaredOnceInOrder: every API of the package declares its authorization, is
// registered once, and APIs lists them by key (what server's registry takes at init).
func TestAPIsAreDeclaredOnceInOrder(t *testing.T) {
	all := APIs()
	if len(all) < 18 {
		t.Fatalf("only %d admin APIs registered", len(all))
	}
	for i, a := range all {
		if !a.Authz.Declared() {
			t.Errorf("api key %d: authorization not declared: %+v", a.Key, a.Authz)
		}
		if a.Handle == nil || a.Min > a.Max {
			t.Errorf("api key %d: no handler, or versions %d-%d", a.Key, a.Min, a.Max)
		}
		if i > 0 && all[i-1].Key >= a.Key {
			t.Errorf("api keys %d, %d: not sorted, or registered twice", all[i-1].Key, a.Key)
		}
	}
}
