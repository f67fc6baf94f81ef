package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// mustCreateACLs creates b's bindings with kadm as cl, failing on any error.
func mustCreateACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(adminCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %s %s %s %v: %v %s", r.Principal, r.Type, r.Name, r.Operation, r.Err, r.ErrMessage)
		}
	}
}

// consumeOne reads one record of topic as cl's user in group, within 10 s.
func consumeOne(t *testing.T, b *broker, user, pw, topic, group string) error {
	t.Helper()
	cl := saslClient(t, b, user, pw, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		if fs.NumRecords() > 0 {
			return nil
		}
	}
}

// TestACLsAsKafka: bindings of Kafka's whole model, created with kadm against the node: a
// read-only consumer reads and is refused writes; a DENY inside a granted prefix holds; a
// binding for another host does not apply; all of it survives a restart and DescribeAcls
// lists it as created.
func TestACLsAsKafka(t *testing.T) {
	b := tenantBroker(t)
	admin := kadm.NewClient(saslClient(t, b, "admin", "admin-secret"))
	alice := saslClient(t, b, "alice", "alice-secret")
	if err := produceErr(alice, "alice.data"); err != nil {
		t.Fatal(err)
	}

	// bob becomes a read-only consumer of alice.: READ on the topics, READ on groups readers.
	mustCreateACLs(t, admin, kadm.NewACLs().Topics("alice.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:bob").Operations(kadm.OpRead))
	mustCreateACLs(t, admin, kadm.NewACLs().Groups("readers.").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:bob").Operations(kadm.OpRead))
	// alice keeps alice. but may not touch alice.secret (a DENY inside her prefix).
	mustCreateACLs(t, admin, kadm.NewACLs().Topics("alice.secret").ResourcePatternType(kadm.ACLPatternPrefixed).
		Deny("User:alice").Operations(kadm.OpAll))
	// bob may write hosted. only from an address that is not his.
	mustCreateACLs(t, admin, kadm.NewACLs().Topics("hosted.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:bob").AllowHosts("10.9.9.9").Operations(kadm.OpWrite, kadm.OpCreate))

	check := func(when string) {
		t.Helper()
		bobCl := saslClient(t, b, "bob", "bob-secret")
		if err := consumeOne(t, b, "bob", "bob-secret", "alice.data", "readers."+when); err != nil {
			t.Errorf("%s: bob consumes alice.data in his group: %v", when, err)
		}
		if err := produceErr(bobCl, "alice.data"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s: bob produces to alice.data: %v, want TOPIC_AUTHORIZATION_FAILED", when, err)
		}
		if err := produceErr(bobCl, "hosted.x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s: bob produces to hosted.x from 127.0.0.1 (granted for 10.9.9.9): %v", when, err)
		}
		if resp, err := kadm.NewClient(bobCl).DeleteTopics(adminCtx(t), "alice.data"); err != nil || !errors.Is(resp["alice.data"].Err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s: bob deletes alice.data: %v %v, want TOPIC_AUTHORIZATION_FAILED", when, err, resp["alice.data"].Err)
		}
		aliceCl := saslClient(t, b, "alice", "alice-secret")
		if err := produceErr(aliceCl, "alice.secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s: alice produces to alice.secret (denied): %v", when, err)
		}
		if err := produceErr(aliceCl, "alice.open"); err != nil {
			t.Errorf("%s: alice produces to alice.open (her prefix): %v", when, err)
		}
	}
	check("before")

	// Every created binding is listed as created, with its operation, permission and host.
	want := map[string]bool{
		"TOPIC PREFIXED alice. User:bob * READ ALLOW":             true,
		"GROUP PREFIXED readers. User:bob * READ ALLOW":           true,
		"TOPIC PREFIXED alice.secret User:alice * ALL DENY":       true,
		"TOPIC PREFIXED hosted. User:bob 10.9.9.9 WRITE ALLOW":    true,
		"TOPIC PREFIXED hosted. User:bob 10.9.9.9 CREATE ALLOW":   true,
		"TOPIC PREFIXED bob. User:bob * ALL ALLOW":                true, // the config file's
		"TOPIC PREFIXED alice. User:alice * ALL ALLOW":            true,
		"TRANSACTIONAL_ID PREFIXED alice. User:alice * ALL ALLOW": true,
		"TOPIC LITERAL * User:admin * ALL ALLOW":                  true,
		"GROUP PREFIXED alice. User:alice * ALL ALLOW":            true,
		"GROUP PREFIXED bob. User:bob * ALL ALLOW":                true,
		"TRANSACTIONAL_ID PREFIXED bob. User:bob * ALL ALLOW":     true,
		"GROUP LITERAL * User:admin * ALL ALLOW":                  true,
		"TRANSACTIONAL_ID LITERAL * User:admin * ALL ALLOW":       true,
	}
	listed := func() map[string]bool {
		res, err := admin.DescribeACLs(adminCtx(t), kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().AllowHosts().Deny().DenyHosts())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("describe: %v", r.Err)
			}
			for _, d := range r.Described {
				got[fmt.Sprintf("%s %s %s %s %s %s %s", d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission)] = true
			}
		}
		return got
	}
	if got := listed(); !mapsEqual(got, want) {
		t.Errorf("DescribeAcls:\n got %v\nwant %v", got, want)
	}

	restartTenants(t, b)
	admin = kadm.NewClient(saslClient(t, b, "admin", "admin-secret"))
	check("after")
	if got := listed(); !mapsEqual(got, want) {
		t.Errorf("DescribeAcls after a restart:\n got %v\nwant %v", got, want)
	}

	// DeleteAcls with a MATCH filter removes what applies to alice.secret: her DENY (and her
	// alice. ALLOW, which the filter also matches); ANY principal.
	res, err := admin.DeleteACLs(adminCtx(t), kadm.NewACLs().Topics("alice.secret").ResourcePatternType(kadm.ACLPatternMatch).
		Allow("User:alice").AllowHosts().Deny("User:alice").DenyHosts().Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, r := range res {
		deleted += len(r.Deleted)
	}
	if deleted != 2 {
		t.Errorf("DeleteAcls MATCH alice.secret for alice deleted %d bindings, want 2 (her DENY and her prefix): %+v", deleted, res)
	}
	if err := produceErr(saslClient(t, b, "alice", "alice-secret"), "alice.open2"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice after her alice. binding was deleted: %v", err)
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
