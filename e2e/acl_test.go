package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/auth"
	"inlet/conn"
	"inlet/server"
	"inlet/tenants"
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

// TestDeniedDescribeLearnsNothing: inside her prefix, alice is denied alice.secret. (topics)
// and alice.hidden. (groups). Every API that names a topic or group answers her the same,
// byte for byte but the name, about alice.secret.a (it exists, has records, offsets and a
// producer) as about alice.secret.b (it exists nowhere), and the listings leave them out.
func TestDeniedDescribeLearnsNothing(t *testing.T) {
	b := tenantBroker(t)
	adminCl := saslClient(t, b, "admin", "admin-secret")
	admin := kadm.NewClient(adminCl)
	if err := produceErr(adminCl, "alice.secret.a"); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "alice.secret.a", Partition: 0, At: 1})
	for _, g := range []string{"alice.g", "alice.hidden.a"} {
		if _, err := admin.CommitOffsets(adminCtx(t), g, offs); err != nil {
			t.Fatal(err)
		}
	}
	mustCreateACLs(t, admin, kadm.NewACLs().Topics("alice.secret.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Deny("User:alice").Operations(kadm.OpAll))
	mustCreateACLs(t, admin, kadm.NewACLs().Groups("alice.hidden.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Deny("User:alice").Operations(kadm.OpDescribe))

	rc := loginRaw(t, b.srv.ListenerAddr("sasl"), "alice", "alice-secret")
	same := func(api string, mk func(name string) kmsg.Request, a, b string) {
		t.Helper()
		rawA, _, errA := exchange(rc, mk(a))
		rawB, _, errB := exchange(rc, mk(b))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v %v", api, errA, errB)
		}
		if got := bytes.ReplaceAll(rawA, []byte(a), []byte(b)); !bytes.Equal(got, rawB) {
			t.Errorf("%s tells %s (exists) from %s (does not):\n%q\n%q", api, a, b, rawA, rawB)
		}
	}
	const hidden, none = "alice.secret.a", "alice.secret.b"
	same("Metadata", func(n string) kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.Version, r.AllowAutoTopicCreation = 12, true
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		r.Topics = append(r.Topics, mt)
		return r
	}, hidden, none)
	same("ListOffsets", func(n string) kmsg.Request {
		r := kmsg.NewPtrListOffsetsRequest()
		r.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = n
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}, hidden, none)
	same("OffsetFetch", func(n string) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 8
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "alice.g"
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = n, []int32{0}
		g.Topics = append(g.Topics, gt)
		r.Groups = append(r.Groups, g)
		return r
	}, hidden, none)
	same("DescribeConfigs", func(n string) kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Version = 4
		rs := kmsg.NewDescribeConfigsRequestResource()
		rs.ResourceType, rs.ResourceName = kmsg.ConfigResourceTypeTopic, n
		r.Resources = append(r.Resources, rs)
		return r
	}, hidden, none)
	same("DescribeProducers", func(n string) kmsg.Request {
		r := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = n, []int32{0}
		r.Topics = append(r.Topics, rt)
		return r
	}, hidden, none)
	same("DescribeGroups", func(n string) kmsg.Request {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Version, r.Groups, r.IncludeAuthorizedOperations = 5, []string{n}, true
		return r
	}, "alice.hidden.a", "alice.hidden.b")

	// Listings leave out what she may not describe, and keep what she may.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for _, mt := range rc.roundTrip(md).(*kmsg.MetadataResponse).Topics {
		if mt.Topic != nil && *mt.Topic == hidden {
			t.Errorf("Metadata of every topic lists %s", hidden)
		}
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "alice.g" // every topic's offsets
	of.Groups = append(of.Groups, g)
	for _, rg := range rc.roundTrip(of).(*kmsg.OffsetFetchResponse).Groups {
		for _, rt := range rg.Topics {
			if rt.Topic == hidden {
				t.Errorf("OffsetFetch of every topic of alice.g lists %s", hidden)
			}
		}
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	listed := map[string]bool{}
	for _, rg := range rc.roundTrip(lg).(*kmsg.ListGroupsResponse).Groups {
		listed[rg.Group] = true
	}
	if listed["alice.hidden.a"] || !listed["alice.g"] {
		t.Errorf("ListGroups lists %v: want alice.g and not alice.hidden.a", listed)
	}
}

// authorizedOps asks for KIP-430's authorized operations of topic, the cluster (Metadata v8
// and DescribeCluster) and group on rc: the four bit sets. A raw connection: kgo would send
// Metadata at v12, which has no cluster operations.
func authorizedOps(t *testing.T, rc *rawConn, topic, group string) (metaTopic, metaCluster, cluster, grp int32) {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.IncludeClusterAuthorizedOperations, md.IncludeTopicAuthorizedOperations = 8, true, true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mresp := rc.roundTrip(md).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %+v", mresp)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	dresp := rc.roundTrip(dc).(*kmsg.DescribeClusterResponse)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{group}, true
	gresp := rc.roundTrip(dg).(*kmsg.DescribeGroupsResponse)
	if len(gresp.Groups) != 1 {
		t.Fatalf("describe groups: %+v", gresp)
	}
	return mresp.Topics[0].AuthorizedOperations, mresp.AuthorizedOperations, dresp.ClusterAuthorizedOperations, gresp.Groups[0].AuthorizedOperations
}

func opBits(ops ...kmsg.ACLOperation) int32 {
	var b int32
	for _, op := range ops {
		b |= 1 << op
	}
	return b
}

// TestAuthorizedOperations: KIP-430's bit sets in Metadata v8+ (topic and cluster),
// DescribeCluster and DescribeGroups, when asked: with no authorizer every operation of the
// resource type (what librdkafka's admin tests expect); for a principal, those it holds.
func TestAuthorizedOperations(t *testing.T) {
	allTopic := opBits(kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDelete,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs)
	allCluster := opBits(kmsg.ACLOperationCreate, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite)
	allGroup := opBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete)

	open := startBroker(t, nil)
	open.createTopic("t", 1)
	if mt, mc, c, g := authorizedOps(t, dialRaw(t, open.addr), "t", "g"); mt != allTopic || mc != allCluster || c != allCluster || g != allGroup {
		t.Errorf("without an authorizer: topic %b cluster %b/%b group %b; want %b %b %b", mt, mc, c, g, allTopic, allCluster, allGroup)
	}

	b := tenantBroker(t)
	b.createTopic("alice.data", 1)
	admin := kadm.NewClient(saslClient(t, b, "admin", "admin-secret"))
	mustCreateACLs(t, admin, kadm.NewACLs().Topics("alice.").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:bob").Operations(kadm.OpRead))
	mustCreateACLs(t, admin, kadm.NewACLs().Clusters().Allow("User:bob").Operations(kadm.OpDescribe))
	addr := b.srv.ListenerAddr("sasl")
	mt, mc, c, g := authorizedOps(t, loginRaw(t, addr, "bob", "bob-secret"), "alice.data", "bob.g")
	if want := opBits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe); mt != want {
		t.Errorf("bob's operations on alice.data: %b, want READ and DESCRIBE %b", mt, want)
	}
	if want := opBits(kmsg.ACLOperationDescribe); mc != want || c != want {
		t.Errorf("bob's operations on the cluster: %b and %b, want DESCRIBE %b", mc, c, want)
	}
	if g != allGroup {
		t.Errorf("bob's operations on bob.g (his prefix): %b, want %b", g, allGroup)
	}
	if mt, mc, c, _ := authorizedOps(t, loginRaw(t, addr, "admin", "admin-secret"), "alice.data", "x"); mt != allTopic || mc != allCluster || c != allCluster {
		t.Errorf("a super user's operations: topic %b cluster %b/%b", mt, mc, c)
	}
}

// TestTenantsFileBeforeACLsMigrates: a tenants.json holding prefix changes, as the node
// wrote them before ACLs (tenants.State.AddPrefix and RemovePrefix, the format it kept), is
// migrated at start-up to the bindings it stood for: alice's added prefix is a binding in
// force, bob's removed one is gone (his groups, which followed it, too); the file is
// rewritten as bindings and a second restart keeps them.
func TestTenantsFileBeforeACLsMigrates(t *testing.T) {
	b := tenantBroker(t)
	b.stop()
	path := filepath.Join(b.dir, "tenants.json")
	st, err := tenants.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Change(func(s *tenants.State) (bool, error) {
		s.AddPrefix("alice", tenants.Topic, "shared.", []string{"alice."})
		s.RemovePrefix("bob", tenants.Topic, "bob.", []string{"bob."})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(path); !bytes.Contains(raw, []byte(`"prefixes"`)) {
		t.Fatalf("the file is not in the old format: %s", raw)
	}
	for round := range 2 {
		b.cfg.Users = tenantUsers(t)
		b.start()
		alice := saslClient(t, b, "alice", "alice-secret")
		if err := produceErr(alice, fmt.Sprintf("shared.x%d", round)); err != nil {
			t.Errorf("round %d: alice to shared. (added before ACLs): %v", round, err)
		}
		bob := saslClient(t, b, "bob", "bob-secret")
		if err := produceErr(bob, "bob.x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("round %d: bob to bob. (removed before ACLs): %v", round, err)
		}
		acls, _ := aclsOf(t, saslClient(t, b, "admin", "admin-secret"), nil)
		if !acls["TOPIC PREFIXED shared. User:alice"] || acls["TOPIC PREFIXED bob. User:bob"] || acls["GROUP PREFIXED bob. User:bob"] {
			t.Errorf("round %d: bindings %v", round, acls)
		}
		raw, _ := os.ReadFile(path)
		if bytes.Contains(raw, []byte(`"prefixes"`)) || !bytes.Contains(raw, []byte(`"acls"`)) {
			t.Errorf("round %d: tenants.json not migrated: %s", round, raw)
		}
		b.stop()
	}
	b.start() // for the cleanup's stop
}

// TestACLsWithSarama: sarama's ClusterAdmin creates a host-restricted DENY and lists and
// deletes it by filter, as against Kafka; the DENY is in force in between.
func TestACLsWithSarama(t *testing.T) {
	b := tenantBroker(t)
	adm := saramaAdmin(t, b)
	res := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: "alice.", ResourcePatternType: sarama.AclPatternPrefixed}
	deny := sarama.Acl{Principal: "User:alice", Host: "127.0.0.1", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionDeny}
	if err := adm.CreateACL(res, deny); err != nil {
		t.Fatal(err)
	}
	if err := produceErr(saslClient(t, b, "alice", "alice-secret", kgo.DisableIdempotentWrite()), "alice.t"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice writes from 127.0.0.1 under a DENY for it: %v", err)
	}
	// An idempotent producer needs WRITE on some topic (Kafka's authorizeByResourceType): the
	// DENY covers all of hers, so InitProducerId is refused.
	if err := produceErr(saslClient(t, b, "alice", "alice-secret"), "alice.t"); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice's idempotent producer under a DENY of all her writes: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	filter := sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Principal: strPtr("User:alice"), Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionDeny}
	got, err := adm.ListAcls(filter)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Acls) != 1 || got[0].ResourceName != "alice." || *got[0].Acls[0] != deny {
		t.Fatalf("sarama lists alice's DENY bindings as %+v", got)
	}
	m, err := adm.DeleteACL(filter, false)
	if err != nil || len(m) != 1 {
		t.Fatalf("sarama deletes alice's DENY: %v %+v", err, m)
	}
	if err := produceErr(saslClient(t, b, "alice", "alice-secret"), "alice.t"); err != nil {
		t.Errorf("alice writes after the DENY was deleted: %v", err)
	}
}

// TestAllowEveryoneIfNoACLFound: with allow.everyone.if.no.acl.found, a topic no binding
// matches is open to every principal, and one that a binding matches (anyone's) is not;
// without it (the default) the unmatched topic is refused too.
func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	for _, open := range []bool{false, true} {
		b := startBroker(t, func(c *server.Config) {
			var us []auth.User
			for _, u := range []struct{ name, prefix string }{{"alice", "alice."}, {"bob", "bob."}} {
				cred, err := auth.NewCredential(auth.ScramSHA256, u.name+"-secret", auth.MinIterations)
				if err != nil {
					t.Fatal(err)
				}
				us = append(us, auth.User{Principal: auth.Principal{Name: u.name, TopicPrefixes: []string{u.prefix}}, SHA256: &cred})
			}
			users, err := auth.NewUsers(us)
			if err != nil {
				t.Fatal(err)
			}
			c.Users, c.AllowEveryoneIfNoACLFound = users, open
			c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
		})
		alice := saslClient(t, b, "alice", "alice-secret", kgo.DisableIdempotentWrite())
		if err := produceErr(alice, "bob.t"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("allow-everyone %v: alice to bob.t (bob's binding matches it): %v", open, err)
		}
		err := produceErr(alice, "free.t")
		if open && err != nil || !open && !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("allow-everyone %v: alice to free.t (no binding matches): %v", open, err)
		}
	}
}
