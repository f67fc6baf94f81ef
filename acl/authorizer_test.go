package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func allow(rt ResourceType, pattern PatternType, name, principal, host string, op Operation) Binding {
	return Binding{rt, name, pattern, principal, host, op, Allow}
}

func deny(rt ResourceType, pattern PatternType, name, principal, host string, op Operation) Binding {
	b := allow(rt, pattern, name, principal, host, op)
	b.Permission = Deny
	return b
}

// TestAuthorize holds the evaluator to the cases Kafka documents (AclAuthorizerTest,
// "Authorization and ACLs" in Kafka's security docs).
func TestAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	cases := []struct {
		name        string
		bindings    []Binding
		super       []string
		allowIfNone bool
		principal   string
		host        string
		rt          ResourceType
		resource    string
		op          Operation
		want        bool
	}{
		{"NoBindingsDenies", nil, nil, false, alice, "10.0.0.1", Topic, "t", Read, false},
		{"NoBindingsAllowEveryone", nil, nil, true, alice, "10.0.0.1", Topic, "t", Read, true},
		{"LiteralAllow", []Binding{allow(Topic, Literal, "t", alice, "*", Read)}, nil, false, alice, "h", Topic, "t", Read, true},
		{"LiteralOtherName", []Binding{allow(Topic, Literal, "t", alice, "*", Read)}, nil, false, alice, "h", Topic, "t2", Read, false},
		{"LiteralOtherPrincipal", []Binding{allow(Topic, Literal, "t", alice, "*", Read)}, nil, false, bob, "h", Topic, "t", Read, false},
		{"LiteralOtherType", []Binding{allow(Topic, Literal, "t", alice, "*", Read)}, nil, false, alice, "h", Group, "t", Read, false},
		{"OtherOperation", []Binding{allow(Topic, Literal, "t", alice, "*", Read)}, nil, false, alice, "h", Topic, "t", Write, false},
		{"WildcardResource", []Binding{allow(Topic, Literal, "*", alice, "*", Write)}, nil, false, alice, "h", Topic, "anything", Write, true},
		{"WildcardPrincipal", []Binding{allow(Topic, Literal, "t", "User:*", "*", Read)}, nil, false, bob, "h", Topic, "t", Read, true},
		{"PrefixMatch", []Binding{allow(Topic, Prefixed, "cdc.", alice, "*", Read)}, nil, false, alice, "h", Topic, "cdc.orders", Read, true},
		{"PrefixNoMatch", []Binding{allow(Topic, Prefixed, "cdc.", alice, "*", Read)}, nil, false, alice, "h", Topic, "cd", Read, false},
		{"PrefixIsNotWildcard", []Binding{allow(Topic, Prefixed, "*", alice, "*", Read)}, nil, false, alice, "h", Topic, "t", Read, false},
		{"HostMatch", []Binding{allow(Topic, Literal, "t", alice, "192.168.0.1", Read)}, nil, false, alice, "192.168.0.1", Topic, "t", Read, true},
		{"HostMismatch", []Binding{allow(Topic, Literal, "t", alice, "192.168.0.1", Read)}, nil, false, alice, "192.168.0.2", Topic, "t", Read, false},
		{"DenyOverAllow", []Binding{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Literal, "t", alice, "*", Read)}, nil, false, alice, "h", Topic, "t", Read, false},
		{"DenyInsidePrefix", []Binding{allow(Topic, Prefixed, "shared.", alice, "*", All), deny(Topic, Literal, "shared.secret", alice, "*", All)}, nil, false, alice, "h", Topic, "shared.secret", Read, false},
		{"DenyInsidePrefixLeavesTheRest", []Binding{allow(Topic, Prefixed, "shared.", alice, "*", All), deny(Topic, Literal, "shared.secret", alice, "*", All)}, nil, false, alice, "h", Topic, "shared.open", Read, true},
		{"DenyWildcardPrincipal", []Binding{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Literal, "t", "User:*", "*", Read)}, nil, false, alice, "h", Topic, "t", Read, false},
		{"DenyOneHost", []Binding{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Literal, "t", alice, "10.0.0.9", Read)}, nil, false, alice, "10.0.0.9", Topic, "t", Read, false},
		{"DenyOtherHost", []Binding{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Literal, "t", alice, "10.0.0.9", Read)}, nil, false, alice, "10.0.0.1", Topic, "t", Read, true},
		{"DenyOtherOperation", []Binding{allow(Topic, Literal, "t", alice, "*", All), deny(Topic, Literal, "t", alice, "*", Write)}, nil, false, alice, "h", Topic, "t", Read, true},
		{"DenyOfReadDoesNotDenyDescribe", []Binding{allow(Topic, Literal, "t", alice, "*", Describe), deny(Topic, Literal, "t", alice, "*", Read)}, nil, false, alice, "h", Topic, "t", Describe, true},
		{"DenyAll", []Binding{allow(Topic, Literal, "t", alice, "*", Read), deny(Topic, Prefixed, "t", alice, "*", All)}, nil, false, alice, "h", Topic, "t", Read, false},
		{"ReadImpliesDescribe", []Binding{allow(Topic, Literal, "t", alice, "*", Read)}, nil, false, alice, "h", Topic, "t", Describe, true},
		{"WriteImpliesDescribe", []Binding{allow(Topic, Literal, "t", alice, "*", Write)}, nil, false, alice, "h", Topic, "t", Describe, true},
		{"DeleteImpliesDescribe", []Binding{allow(Topic, Literal, "t", alice, "*", Delete)}, nil, false, alice, "h", Topic, "t", Describe, true},
		{"AlterImpliesDescribe", []Binding{allow(Topic, Literal, "t", alice, "*", Alter)}, nil, false, alice, "h", Topic, "t", Describe, true},
		{"CreateDoesNotImplyDescribe", []Binding{allow(Topic, Literal, "t", alice, "*", Create)}, nil, false, alice, "h", Topic, "t", Describe, false},
		{"DescribeDoesNotImplyRead", []Binding{allow(Topic, Literal, "t", alice, "*", Describe)}, nil, false, alice, "h", Topic, "t", Read, false},
		{"AlterConfigsImpliesDescribeConfigs", []Binding{allow(Topic, Literal, "t", alice, "*", AlterConfigs)}, nil, false, alice, "h", Topic, "t", DescribeConfigs, true},
		{"AlterDoesNotImplyAlterConfigs", []Binding{allow(Topic, Literal, "t", alice, "*", Alter)}, nil, false, alice, "h", Topic, "t", AlterConfigs, false},
		{"AllImpliesEverything", []Binding{allow(Cluster, Literal, ClusterName, alice, "*", All)}, nil, false, alice, "h", Cluster, ClusterName, IdempotentWrite, true},
		{"SuperUserWithoutBindings", nil, []string{alice}, false, alice, "h", Cluster, ClusterName, Alter, true},
		{"SuperUserOverDeny", []Binding{deny(Topic, Literal, "t", alice, "*", All)}, []string{alice}, false, alice, "h", Topic, "t", Write, true},
		// allow.everyone.if.no.acl.found looks at every principal's bindings: once bob has
		// one on t, alice (with none) is refused.
		{"AllowEveryoneOnlyWithoutAnyBinding", []Binding{allow(Topic, Literal, "t", bob, "*", Read)}, nil, true, alice, "h", Topic, "t", Read, false},
		{"AllowEveryoneOtherResource", []Binding{allow(Topic, Literal, "t", bob, "*", Read)}, nil, true, alice, "h", Topic, "u", Read, true},
		{"AllowEveryoneNotOverDeny", []Binding{deny(Topic, Literal, "t", alice, "*", Read)}, nil, true, alice, "h", Topic, "t", Read, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(c.bindings, c.super, c.allowIfNone)
			if got := a.Authorize(c.principal, c.host, c.rt, c.resource, c.op); got != c.want {
				t.Errorf("Authorize(%s, %s, %s %q, %s) = %v, want %v over %v", c.principal, c.host, c.rt, c.resource, c.op, got, c.want, c.bindings)
			}
		})
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := New([]Binding{allow(Topic, Prefixed, "cdc.", "User:reader", "*", Read)}, nil, false)
	want := int32(1<<Read | 1<<Describe)
	if got := a.AuthorizedOperations("User:reader", "h", Topic, "cdc.x"); got != want {
		t.Errorf("reader's operations on cdc.x: %b, want %b", got, want)
	}
	if got := a.AuthorizedOperations("User:reader", "h", Topic, "other"); got != 0 {
		t.Errorf("reader's operations on other: %b, want none", got)
	}
	// librdkafka's admin tests: topic operations are these eight.
	if got, want := AllOperations(Topic), int32(1<<3|1<<4|1<<5|1<<6|1<<7|1<<8|1<<10|1<<11); got != want {
		t.Errorf("AllOperations(TOPIC) = %b, want %b", got, want)
	}
}

func TestAuthorizeAny(t *testing.T) {
	const p = "User:p"
	cases := []struct {
		name     string
		bindings []Binding
		want     bool
	}{
		{"None", nil, false},
		{"AllowOnePrefix", []Binding{allow(Topic, Prefixed, "a.", p, "*", Write)}, true},
		{"AllowAll", []Binding{allow(Topic, Literal, "t", p, "*", All)}, true},
		{"OnlyRead", []Binding{allow(Topic, Literal, "t", p, "*", Read)}, false},
		{"DeniedByWildcard", []Binding{allow(Topic, Prefixed, "a.", p, "*", Write), deny(Topic, Literal, "*", p, "*", Write)}, false},
		{"DeniedByCoveringPrefix", []Binding{allow(Topic, Prefixed, "a.b", p, "*", Write), deny(Topic, Prefixed, "a.", p, "*", Write)}, false},
		{"DenyNarrower", []Binding{allow(Topic, Prefixed, "a.", p, "*", Write), deny(Topic, Literal, "a.x", p, "*", Write)}, true},
	}
	for _, c := range cases {
		if got := New(c.bindings, nil, false).AuthorizeAny(p, "h", Topic, Write); got != c.want {
			t.Errorf("%s: AuthorizeAny = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	b := allow(Topic, Prefixed, "cdc.", "User:a", "*", Read)
	name := func(s string) *string { return &s }
	cases := []struct {
		name string
		f    Filter
		want bool
	}{
		{"AnyEverything", Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, true},
		{"ExactPrefixed", Filter{Topic, name("cdc."), Prefixed, name("User:a"), name("*"), Read, Allow}, true},
		{"LiteralIsNotPrefixed", Filter{Topic, name("cdc."), Literal, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, false},
		{"AnyPatternSameName", Filter{Topic, name("cdc."), kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, true},
		{"AnyPatternOtherName", Filter{Topic, name("cdc.x"), kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, false},
		{"MatchAppliesToName", Filter{Topic, name("cdc.x"), kmsg.ACLResourcePatternTypeMatch, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, true},
		{"MatchNotUnder", Filter{Topic, name("cd"), kmsg.ACLResourcePatternTypeMatch, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, false},
		{"OtherPrincipal", Filter{Topic, nil, kmsg.ACLResourcePatternTypeAny, name("User:b"), nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, false},
		{"HostIsExactInFilters", Filter{Topic, nil, kmsg.ACLResourcePatternTypeAny, nil, name("10.0.0.1"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, false},
		{"OtherOperation", Filter{Topic, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, Write, kmsg.ACLPermissionTypeAny}, false},
		{"AllIsExactInFilters", Filter{Topic, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, All, kmsg.ACLPermissionTypeAny}, false},
		{"Deny", Filter{Topic, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, Deny}, false},
	}
	for _, c := range cases {
		if got := c.f.Matches(b); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
	wild := allow(Topic, Literal, "*", "User:a", "*", Read)
	if !(Filter{Topic, name("any"), kmsg.ACLResourcePatternTypeMatch, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}).Matches(wild) {
		t.Error("MATCH does not select the wildcard binding")
	}
}

func TestValidate(t *testing.T) {
	ok := allow(Topic, Prefixed, "cdc.", "User:a", "*", Read)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]Binding{
		"EmptyName":         allow(Topic, Literal, "", "User:a", "*", Read),
		"MatchPattern":      allow(Topic, kmsg.ACLResourcePatternTypeMatch, "t", "User:a", "*", Read),
		"BadPrincipal":      allow(Topic, Literal, "t", "alice", "*", Read),
		"AnyOperation":      allow(Topic, Literal, "t", "User:a", "*", kmsg.ACLOperationAny),
		"ClusterOtherName":  allow(Cluster, Literal, "c", "User:a", "*", Alter),
		"GroupWrite":        allow(Group, Literal, "g", "User:a", "*", Write),
		"UnknownPermission": {Topic, "t", Literal, "User:a", "*", Read, kmsg.ACLPermissionTypeAny},
		"AnyResourceType":   allow(kmsg.ACLResourceTypeAny, Literal, "t", "User:a", "*", Read),
	} {
		if b.Validate() == nil {
			t.Errorf("%s: %v validates", name, b)
		}
	}
}

func TestAuthorizeAllocatesNothing(t *testing.T) {
	a := New([]Binding{allow(Topic, Prefixed, "cdc.", "User:a", "*", Read), deny(Topic, Literal, "cdc.x", "User:a", "*", Write)}, nil, false)
	if n := testing.AllocsPerRun(100, func() { a.Authorize("User:a", "h", Topic, "cdc.y", Read) }); n != 0 {
		t.Errorf("Authorize allocates %v times", n)
	}
}
