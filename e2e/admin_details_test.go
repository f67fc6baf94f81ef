package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Admin answers that tools rely on, as Kafka gives them (issue 21's admin details).

// TestScramCredentialsWithoutSASLUsers: on a node without SASL users, as on any Kafka
// broker, DescribeUserScramCredentials answers (nothing, at first) and an upsertion is
// stored: it is described after, and after a restart; deleting it removes it, and deleting
// again is RESOURCE_NOT_FOUND.
func TestScramCredentialsWithoutSASLUsers(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(newKgo(t, b.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(described) != 0 {
		t.Fatalf("describe every user: %v %v, want none and no error", described, err)
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"}})
	if err != nil || altered["carol"].Err != nil {
		t.Fatalf("upsert carol: %v %+v", err, altered)
	}
	check := func(when string) {
		t.Helper()
		described, err := adm.DescribeUserSCRAMs(ctx)
		if err != nil || len(described) != 1 || len(described["carol"].CredInfos) != 1 ||
			described["carol"].CredInfos[0].Mechanism != kadm.ScramSha512 || described["carol"].CredInfos[0].Iterations != 8192 {
			t.Fatalf("%s: described %+v, %v; want carol's SCRAM-SHA-512 of 8192 iterations", when, described, err)
		}
	}
	check("after the upsertion")
	b.stop()
	b.start()
	adm = kadm.NewClient(newKgo(t, b.addr))
	check("after a restart")
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || altered["carol"].Err != nil {
		t.Fatalf("delete carol: %v %+v", err, altered)
	}
	if described, err := adm.DescribeUserSCRAMs(ctx); err != nil || len(described) != 0 {
		t.Fatalf("after the deletion: %+v %v, want none", described, err)
	}
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || !errors.Is(altered["carol"].Err, kerr.ResourceNotFound) {
		t.Fatalf("delete carol again: %v %+v, want RESOURCE_NOT_FOUND", err, altered)
	}
}

// TestScramUpsertionTakesAnySaltedPassword: Kafka validates the user, the mechanism and the
// iterations of an upsertion, not the length of its salted password; those rules still hold
// (UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE).
func TestScramUpsertionTakesAnySaltedPassword(t *testing.T) {
	b := startBroker(t, nil)
	cl := newKgo(t, b.addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "short", Mechanism: kadm.ScramSha256, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: []byte("ten bytes!")},
		{User: "long", Mechanism: kadm.ScramSha512, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 100)},
	})
	if err != nil || altered["short"].Err != nil || altered["long"].Err != nil {
		t.Fatalf("salted passwords of 10 and 100 bytes: %v %+v, want both stored", err, altered)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iterations int32) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iterations, []byte("s"), []byte("p")
		req.Upsertions = append(req.Upsertions, u)
	}
	up("few", 1, 4095)
	up("many", 1, 16385)
	up("", 1, 4096)
	up("mech", 3, 4096)
	up("twice", 1, 4096)
	up("twice", 2, 4096)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	unacceptable, dup := kerr.UnacceptableCredential.Code, kerr.DuplicateResource.Code
	want := map[string]int16{"few": unacceptable, "many": unacceptable, "": unacceptable, "mech": kerr.UnsupportedSaslMechanism.Code, "twice": dup}
	got := map[string]int16{}
	for _, r := range resp.Results {
		got[r.User] = r.ErrorCode
	}
	for u, code := range want {
		if got[u] != code {
			t.Errorf("upsertion of %q: error %d, want %d", u, got[u], code)
		}
	}
}

// TestUpdateFeaturesTopLevelErrorEveryVersion: as Kafka's controller, a failed update is the
// request's top-level error in v0 and v1 too, with no per-feature results.
func TestUpdateFeaturesTopLevelErrorEveryVersion(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for v := int16(0); v <= 2; v++ {
		// kgo sends the highest version both sides support: pin it.
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(57, v)
		cl := newKgo(t, b.addr, kgo.MaxVersions(vs))
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel = "transaction.version", 2
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.InvalidUpdateVersion.Code || len(resp.Results) != 0 {
			t.Errorf("v%d: top-level error %d, %d per-feature results; want INVALID_UPDATE_VERSION and none", v, resp.ErrorCode, len(resp.Results))
		}
	}
}
