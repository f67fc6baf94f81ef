package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"inlet/auth"
	"inlet/conn"
	"inlet/server"
)

// tenantUsers are alice (alice.), bob (bob.) and admin (every topic), as a config file gives
// them; built anew for every start, as the binary reads its file.
func tenantUsers(t testing.TB) *auth.Users {
	t.Helper()
	var us []auth.User
	for _, u := range []struct{ name, pw, prefix string }{{"alice", "alice-secret", "alice."}, {"bob", "bob-secret", "bob."}, {"admin", "admin-secret", "*"}} {
		c, err := auth.NewCredential(auth.ScramSHA256, u.pw, auth.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, auth.User{Principal: auth.Principal{Name: u.name, TopicPrefixes: []string{u.prefix}}, SHA256: &c})
	}
	users, err := auth.NewUsers(us)
	if err != nil {
		t.Fatal(err)
	}
	return users
}

func tenantBroker(t *testing.T) *broker {
	return startBroker(t, func(c *server.Config) {
		c.Users = tenantUsers(t)
		c.SuperUsers = []string{"admin"}
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
	})
}

// restartTenants restarts b as the binary restarts: the config file's users read anew.
func restartTenants(t *testing.T, b *broker) {
	b.stop()
	b.cfg.Users = tenantUsers(t)
	b.start()
}

func saslClient(t *testing.T, b *broker, user, pw string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.srv.ListenerAddr("sasl")),
		kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha256Mechanism()), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2), kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// saramaAdmin is sarama's ClusterAdmin logged in as admin over PLAIN.
func saramaAdmin(t *testing.T, b *broker) sarama.ClusterAdmin {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.SASL.Enable, cfg.Net.SASL.User, cfg.Net.SASL.Password = true, "admin", "admin-secret"
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	adm, err := sarama.NewClusterAdmin([]string{b.srv.ListenerAddr("sasl")}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

func produceErr(cl *kgo.Client, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// aclsOf lists the ACL bindings DescribeAcls gives cl for principal (nil: all), as
// "TYPE PATTERN name principal".
func aclsOf(t *testing.T, cl *kgo.Client, principal *string) (map[string]bool, int16) {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType, req.Principal = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny, principal
	resp, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			if a.Host != "*" || a.Operation != kmsg.ACLOperationAll || a.PermissionType != kmsg.ACLPermissionTypeAllow {
				t.Errorf("binding %v %s: host %s, operation %v, permission %v", r.ResourceType, r.ResourceName, a.Host, a.Operation, a.PermissionType)
			}
			out[r.ResourceType.String()+" "+r.ResourcePatternType.String()+" "+r.ResourceName+" "+a.Principal] = true
		}
	}
	return out, resp.ErrorCode
}

func createACL(t *testing.T, cl *kgo.Client, rt kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal string, op kmsg.ACLOperation) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourcePatternType, c.ResourceName = rt, pattern, name
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	resp, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	if m := resp.Results[0].ErrorMessage; m != nil {
		msg = *m
	}
	return resp.Results[0].ErrorCode, msg
}

// TestACLsScopeUsersAtRunTime: DescribeAcls shows each user's prefixes as PREFIXED ALLOW ALL
// bindings; CreateAcls and DeleteAcls by a super user change them at once for connections
// already open, and durably (a restart keeps them, the config file being the starting
// point); others may not change them; bindings Kafka refuses are refused.
func TestACLsScopeUsersAtRunTime(t *testing.T) {
	b := tenantBroker(t)
	admin := saslClient(t, b, "admin", "admin-secret")
	alice := saslClient(t, b, "alice", "alice-secret")

	acls, code := aclsOf(t, admin, nil)
	for _, want := range []string{"TOPIC PREFIXED alice. User:alice", "GROUP PREFIXED alice. User:alice", "TRANSACTIONAL_ID PREFIXED alice. User:alice", "TOPIC LITERAL * User:admin", "TOPIC PREFIXED bob. User:bob"} {
		if !acls[want] {
			t.Errorf("DescribeAcls (error %d) lacks %q: %v", code, want, acls)
		}
	}
	if own, _ := aclsOf(t, alice, nil); len(own) != 3 || !own["TOPIC PREFIXED alice. User:alice"] {
		t.Errorf("alice sees %v, want her own three bindings", own)
	}

	if err := produceErr(alice, "shared.t"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to shared.t before the ACL: %v", err)
	}
	if code, msg := createACL(t, admin, kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "shared.", "User:alice", kmsg.ACLOperationAll); code != 0 {
		t.Fatalf("create shared. for alice: %d %s", code, msg)
	}
	if err := produceErr(alice, "shared.t"); err != nil {
		t.Fatalf("alice to shared.t after the ACL, same client: %v", err)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.ResourceName = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, kmsg.StringPtr("alice.")
	f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr("User:alice"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	dresp, err := del.RequestWith(adminCtx(t), admin)
	if err != nil || dresp.Results[0].ErrorCode != 0 || len(dresp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("delete alice.: %v %+v", err, dresp)
	}
	if err := produceErr(alice, "alice.x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to alice.x after its ACL was deleted: %v", err)
	}

	if code, _ := createACL(t, alice, kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "bob.", "User:alice", kmsg.ACLOperationAll); code != 31 {
		t.Errorf("alice creating an ACL: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	if code, msg := createACL(t, admin, kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypePrefixed, "x.", "User:alice", kmsg.ACLOperationWrite); code != 42 {
		t.Errorf("WRITE on a group: error %d (%s), want INVALID_REQUEST: not an operation of groups", code, msg)
	}

	restartTenants(t, b)
	alice = saslClient(t, b, "alice", "alice-secret")
	if err := produceErr(alice, "shared.t2"); err != nil {
		t.Errorf("after a restart, alice to shared.t2: %v", err)
	}
	if err := produceErr(alice, "alice.y"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("after a restart, alice to alice.y: %v", err)
	}

	// A second client: sarama's ClusterAdmin lists the same bindings.
	sadm := saramaAdmin(t, b)
	got, err := sadm.ListAcls(sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Principal: strPtr("User:alice"), Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ResourceName != "shared." || got[0].ResourcePatternType != sarama.AclPatternPrefixed {
		t.Errorf("sarama lists alice's topic ACLs as %+v, want only shared.", got)
	}
}

// TestUsersAtRunTime: a super user creates, rotates and deletes users with
// AlterUserScramCredentials; they are described by DescribeUserScramCredentials, kept across
// a restart, and a deleted user's open connections are closed.
func TestUsersAtRunTime(t *testing.T) {
	b := tenantBroker(t)
	ctx := adminCtx(t)
	admin := kadm.NewClient(saslClient(t, b, "admin", "admin-secret"))
	upsert := func(user, pw string) {
		t.Helper()
		res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pw}})
		if err == nil {
			err = res[user].Err
		}
		if err != nil {
			t.Fatalf("upsert %s: %v", user, err)
		}
	}
	upsert("carol", "carol-1")
	described, err := admin.DescribeUserSCRAMs(ctx, "carol")
	if err != nil || described["carol"].Err != nil || len(described["carol"].CredInfos) != 1 || described["carol"].CredInfos[0].Iterations != 4096 {
		t.Fatalf("describe carol: %v %+v", err, described)
	}
	carol := saslClient(t, b, "carol", "carol-1")
	if err := carol.Ping(ctx); err != nil {
		t.Fatalf("carol logs in: %v", err)
	}
	if err := produceErr(carol, "carol.x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("a new user has no prefixes: %v", err)
	}
	if code, msg := createACL(t, saslClient(t, b, "admin", "admin-secret"), kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypePrefixed, "carol.", "User:carol", kmsg.ACLOperationAll); code != 0 {
		t.Fatalf("grant carol.: %d %s", code, msg)
	}
	if err := produceErr(carol, "carol.x"); err != nil {
		t.Fatalf("carol to carol.x after the grant: %v", err)
	}

	upsert("carol", "carol-2") // rotation: the new password works, the old one does not
	if err := saslClient(t, b, "carol", "carol-2").Ping(ctx); err != nil {
		t.Errorf("carol with the new password: %v", err)
	}
	if err := saslClient(t, b, "carol", "carol-1", kgo.RequestRetries(0)).Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("carol with the old password: %v", err)
	}

	// Non-super users may neither alter nor describe users.
	alice := kadm.NewClient(saslClient(t, b, "alice", "alice-secret"))
	res, err := alice.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "x"}})
	if err == nil {
		err = res["alice"].Err // kadm turns an authorization failure into the call's error
	}
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice altering users: %v", err)
	}
	if _, err := alice.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice describing users: %v", err)
	}

	// Persisted: dave, created now, logs in after a restart; carol's grant stays too.
	upsert("dave", "dave-1")
	restartTenants(t, b)
	admin = kadm.NewClient(saslClient(t, b, "admin", "admin-secret"))
	if err := saslClient(t, b, "dave", "dave-1").Ping(ctx); err != nil {
		t.Errorf("dave after a restart: %v", err)
	}
	carol = saslClient(t, b, "carol", "carol-2")
	if err := produceErr(carol, "carol.y"); err != nil {
		t.Fatalf("carol to carol.y after a restart: %v", err)
	}

	// Deleting carol's last credential deletes carol and closes her connections.
	rc := dialRaw(t, b.srv.ListenerAddr("sasl"))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	rc.roundTrip(hs)
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.Version, sa.SASLAuthBytes = 2, []byte("\x00carol\x00carol-2")
	if r := rc.roundTrip(sa).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		t.Fatalf("carol over PLAIN: %d", r.ErrorCode)
	}
	res, err = admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || res["carol"].Err != nil {
		t.Fatalf("delete carol: %v %+v", err, res)
	}
	rc.expectClosed()
	if err := saslClient(t, b, "carol", "carol-2", kgo.RequestRetries(0)).Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("carol after her deletion: %v", err)
	}
	if res, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil); err != nil || !errors.Is(res["carol"].Err, kerr.ResourceNotFound) {
		t.Errorf("deleting carol again: %v %+v", err, res)
	}

	// sarama describes the same users.
	users, err := saramaAdmin(t, b).DescribeUserScramCredentials([]string{"dave"})
	if err != nil || len(users) != 1 || users[0].ErrorCode != sarama.ErrNoError || len(users[0].CredentialInfos) != 1 {
		t.Errorf("sarama describes dave: %v %+v", err, users)
	}
}
