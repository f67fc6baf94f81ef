package admin

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/auth"
	"inlet/tenants"
	"inlet/wire"
)

// DescribeUserScramCredentials v0 and AlterUserScramCredentials v0 (KIP-554): users and their
// SCRAM credentials at run time, kept durably with the config file's users (package tenants).
// Describing needs a super user or a principal scoped to every topic (Kafka: DESCRIBE on the
// cluster), altering a super user (ALTER on the cluster); others get
// CLUSTER_AUTHORIZATION_FAILED. An upsertion carries the salted password the client derived
// (the password never reaches the broker) and creates the user if need be, with no prefixes:
// it can log in but use nothing until ACLs grant it prefixes. Deleting a user's last
// credential deletes the user, and its connections are closed. Kafka's rules: iterations in
// [4096, 16384] (UNACCEPTABLE_CREDENTIAL), a name at most once per request
// (DUPLICATE_RESOURCE), deleting a credential that does not exist RESOURCE_NOT_FOUND; the
// salt and salted password are not checked (ScramControlManager validates only the user, the
// mechanism and the iterations).
//
// Kafka serves both APIs whatever its listeners, so a node without SASL users does too:
// describing answers what is stored (nothing, at first) and an upsertion is stored in the
// data directory's tenants.json, where it becomes a user once the node is started with SASL.
// There, as on a Kafka broker without an authorizer, a connection without security may alter
// credentials; with SASL users only super.users may.
const (
	describeUserScramCredentialsKey = 50
	alterUserScramCredentialsKey    = 51

	maxScramIterations = 16384 // Kafka's ScramMechanism.maxIterations
)

func init() {
	register(API{Key: describeUserScramCredentialsKey, Min: 0, Max: 0, Handle: handleDescribeUserScramCredentials,
		Authz: inHandler(onCluster(acl.Describe))})
	register(API{Key: alterUserScramCredentialsKey, Min: 0, Max: 0, Handle: handleAlterUserScramCredentials,
		Authz: inHandler(onCluster(acl.Alter))})
}

// scramMechanisms are the mechanisms by their numbers in the SCRAM credential APIs.
var scramMechanisms = map[int8]string{1: auth.ScramSHA256, 2: auth.ScramSHA512}

func handleDescribeUserScramCredentials(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.seesAllTenants(r) {
		msg := "Describing users needs a super user."
		resp.ErrorCode, resp.ErrorMessage = wire.ErrClusterAuthorizationFailed, &msg
		return resp, nil
	}
	describe := func(name string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		sha256, sha512 := s.scramCredentials(name)
		for _, m := range []struct {
			n int8
			c *auth.Credential
		}{{1, sha256}, {2, sha512}} {
			if m.c != nil {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = m.n, int32(m.c.Iterations)
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		if len(res.CredentialInfos) == 0 {
			msg := "Attempt to describe a user credential that does not exist: " + name
			res.ErrorCode, res.ErrorMessage = wire.ErrResourceNotFound, &msg
		}
		return res
	}
	if req.Users == nil {
		for _, name := range s.scramUsers() {
			resp.Results = append(resp.Results, describe(name))
		}
		return resp, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	for _, u := range req.Users {
		if count[u.Name] > 1 {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			msg := "Cannot describe user credentials more than once in one request: " + u.Name
			res.User, res.ErrorCode, res.ErrorMessage = u.Name, wire.ErrDuplicateResource, &msg
			resp.Results = append(resp.Results, res)
			count[u.Name] = -1 // answered once
			continue
		}
		if count[u.Name] == 1 {
			resp.Results = append(resp.Results, describe(u.Name))
		}
	}
	return resp, nil
}

func handleAlterUserScramCredentials(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	errs := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	var order []string
	fail := func(user string, code int16, msg string) {
		if errs[user] == nil {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User = user
			errs[user] = &res
		}
		if errs[user].ErrorCode == 0 {
			errs[user].ErrorCode, errs[user].ErrorMessage = code, &msg
		}
	}
	seen := map[string]int{}
	note := func(user string) {
		if _, ok := seen[user]; !ok {
			order = append(order, user)
		}
		seen[user]++
	}
	for _, d := range req.Deletions {
		note(d.Name)
	}
	for _, u := range req.Upsertions {
		note(u.Name)
	}
	// checked applies the rules every deletion and upsertion follows and returns the
	// mechanism's name, or "" after recording why the entry fails.
	checked := func(name string, mechanism int8) string {
		mech, ok := scramMechanisms[mechanism]
		switch {
		case seen[name] > 1:
			fail(name, wire.ErrDuplicateResource, "A user credential cannot be altered twice in the same request")
		case name == "":
			fail(name, wire.ErrUnacceptableCredential, "Username must not be empty")
		case !ok:
			fail(name, wire.ErrUnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		default:
			return mech
		}
		return ""
	}
	var changes []scramChange
	for _, d := range req.Deletions {
		if mech := checked(d.Name, d.Mechanism); mech != "" {
			changes = append(changes, scramChange{d.Name, mech, tenants.CredentialChange{Deleted: true}})
		}
	}
	for _, u := range req.Upsertions {
		mech := checked(u.Name, u.Mechanism)
		switch {
		case mech == "":
		case u.Iterations < auth.MinIterations:
			fail(u.Name, wire.ErrUnacceptableCredential, "Too few iterations")
		case u.Iterations > maxScramIterations:
			fail(u.Name, wire.ErrUnacceptableCredential, "Too many iterations")
		default:
			c, err := auth.CredentialFromSalted(mech, u.Salt, u.SaltedPassword, int(u.Iterations))
			if err != nil {
				fail(u.Name, wire.ErrUnacceptableCredential, err.Error())
				continue
			}
			changes = append(changes, scramChange{u.Name, mech, tenants.CredentialChange{Credential: &c}})
		}
	}
	switch {
	case s.tenants == nil:
		for _, user := range order {
			fail(user, wire.ErrInvalidRequest, "User credentials cannot be changed: this node keeps no data directory.")
		}
		changes = nil
	case s.cfg.Users == nil && r.Conn.Security() == nil:
		// No SASL users and a connection without security: anyone may, as on a Kafka
		// broker without an authorizer.
	case !s.isSuperUser(r):
		for _, user := range order {
			fail(user, wire.ErrClusterAuthorizationFailed, "Only super.users may alter user credentials.")
		}
		changes = nil
	}
	if len(changes) > 0 {
		s.applyScramChanges(changes, fail)
	}
	for _, user := range order {
		if res := errs[user]; res != nil {
			resp.Results = append(resp.Results, *res)
			continue
		}
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// scramCredentials are user's SCRAM credentials in force: the published users' when the node
// has SASL users, else the ones stored at run time (tenants.json).
func (s *Server) scramCredentials(user string) (sha256, sha512 *auth.Credential) {
	if s.cfg.Users == nil && s.tenants == nil {
		return nil, nil
	}
	var st *tenants.State
	if s.cfg.Users == nil {
		st = s.tenants.State()
	}
	return s.scramCredentialsIn(st, user)
}

// scramCredentialsIn is scramCredentials with st the run-time changes (read only when the
// node has no SASL users).
func (s *Server) scramCredentialsIn(st *tenants.State, user string) (sha256, sha512 *auth.Credential) {
	if s.cfg.Users != nil {
		if u, ok := s.cfg.Users.Lookup(user); ok {
			return u.SHA256, u.SHA512
		}
		return nil, nil
	}
	for mech, c := range st.Credentials[user] {
		if c.Deleted || c.Credential == nil {
			continue
		}
		switch mech {
		case auth.ScramSHA256:
			sha256 = c.Credential
		case auth.ScramSHA512:
			sha512 = c.Credential
		}
	}
	return sha256, sha512
}

// scramUsers are the names of the users with a SCRAM credential in force, sorted.
func (s *Server) scramUsers() []string {
	var names []string
	if s.cfg.Users != nil {
		for _, u := range s.cfg.Users.All() {
			if u.SHA256 != nil || u.SHA512 != nil {
				names = append(names, u.Name)
			}
		}
		return names
	}
	if s.tenants == nil {
		return nil
	}
	st := s.tenants.State()
	for name := range st.Credentials {
		if a, b := s.scramCredentialsIn(st, name); a != nil || b != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// scramChange is one credential change an AlterUserScramCredentials request asks for.
type scramChange struct {
	user, mech string
	c          tenants.CredentialChange
}

// applyScramChanges makes changes durable and current in one tenants change; fail records
// why a user's entry failed (a deletion of a credential that does not exist, or the change
// not stored).
func (s *Server) applyScramChanges(changes []scramChange, fail func(user string, code int16, msg string)) {
	err := s.changeTenants(func(st *tenants.State) (bool, error) {
		changed := false
		for _, ch := range changes {
			if ch.c.Deleted {
				// st, not s.tenants.State(): the store is locked during a change.
				sha256, sha512 := s.scramCredentialsIn(st, ch.user)
				if ch.mech == auth.ScramSHA256 && sha256 == nil || ch.mech == auth.ScramSHA512 && sha512 == nil {
					fail(ch.user, wire.ErrResourceNotFound, "Attempt to delete a user credential that does not exist")
					continue
				}
			}
			st.SetCredential(ch.user, ch.mech, ch.c)
			changed = true
		}
		return changed, nil
	})
	if err != nil {
		s.log.Error("alter user scram credentials", "err", err)
		for _, ch := range changes {
			fail(ch.user, wire.ErrUnknownServerError, "The change could not be stored: "+err.Error())
		}
	}
}
