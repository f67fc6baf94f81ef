package admin

import (
	"fmt"
	"path/filepath"
	"slices"

	"inlet/acl"
	"inlet/auth"
	"inlet/tenants"
)

// Tenants at run time: ACL bindings (acls.go, 29-31_*_acls.go) and SCRAM credentials
// (50_describe_user_scram_credentials.go) change through the admin APIs. Changes are made
// durable by package tenants first, then the effective users (the config file's with every
// change) are published in cfg.Users, copy-on-write, and the bindings in s.authz. A connection reads its user's
// current principal before each request (conn.Conn.CurrentPrincipal), so a change applies to
// connections already open; the connections of a user that no longer exists are closed.
// ACL changes need ALTER on the cluster; user changes a principal named in super.users.

// baseUsers (the config file's) are read by changes under tenantsMu, and replaced by
// ReloadUsers under it.

// openTenants loads the run-time changes kept in the data directory and publishes the users
// and quotas they give. Without users (no SASL) only quotas are managed, for the anonymous
// user and the default.
func (s *Server) openTenants() error {
	s.quotas.Set(s.cfg.Quotas)
	if s.blog.Dir() == "" {
		s.publishACLs(&tenants.State{})
		return nil // nowhere to keep changes: none are taken (tenantsDisabled)
	}
	st, err := tenants.Open(filepath.Join(s.blog.Dir(), "tenants.json"))
	if err != nil {
		return err
	}
	s.tenants = st
	// A file written before ACLs holds prefix changes: rewritten once as bindings.
	if _, err := st.Change(func(st *tenants.State) (bool, error) { return st.MigratePrefixes(s.baseUsers), nil }); err != nil {
		return err
	}
	s.publish(st.State())
	return nil
}

// publish makes st's users and quotas current.
func (s *Server) publish(st *tenants.State) {
	if s.cfg.Users != nil {
		s.publishUsers(st)
	}
	s.publishACLs(st)
	s.publishQuotas(st)
}

// changeTenants makes change durable and publishes the users it gives. tenantsMu keeps
// changes and their publication in one order (else an older state could be published last).
func (s *Server) changeTenants(change func(st *tenants.State) (bool, error)) error {
	s.tenantsMu.Lock()
	defer s.tenantsMu.Unlock()
	st, err := s.tenants.Change(func(st *tenants.State) (bool, error) {
		changed, err := change(st)
		if err == nil && changed && s.diskless != nil {
			err = s.diskless.KeepTenants(st) // in the bucket before it is made and answered
		}
		return changed, err
	})
	if err != nil {
		return err
	}
	s.publish(st)
	return nil
}

// publishUsers makes the users of st current and closes the connections of users that are
// gone.
func (s *Server) publishUsers(st *tenants.State) {
	users := tenants.Apply(s.baseUsers, st)
	var gone []string
	_ = s.cfg.Users.Update(func(m map[string]*auth.User) error {
		next := make(map[string]*auth.User, len(users))
		for i := range users {
			next[users[i].Name] = &users[i]
		}
		for name := range m {
			if _, ok := next[name]; !ok {
				gone = append(gone, name)
			}
		}
		clear(m)
		for name, u := range next {
			m[name] = u
		}
		return nil
	})
	for _, name := range gone {
		s.net.CloseUserConns(name)
	}
}

// isSuperUser tells whether r's connection is authenticated as a principal named in
// super.users.
func (s *Server) isSuperUser(r *Request) bool {
	p := r.Conn.Principal()
	return p != nil && slices.Contains(s.cfg.SuperUsers, p.Name)
}

// seesAllTenants tells whether r's connection may describe every user and ACL: DESCRIBE on
// the cluster (a super user, or a binding), or no principal at all (a listener without
// security).
func (s *Server) seesAllTenants(r *Request) bool {
	return s.subjectOf(r).Cluster(acl.Describe)
}

// ReloadUsers makes users the config file's users (SIGHUP): the run-time changes are applied
// on top of them again and published, without dropping connections; the connections of a
// user no longer there are closed. Listeners are not changed: a node started without SASL
// users cannot take them now.
func (s *Server) ReloadUsers(users *auth.Users) error {
	if s.cfg.Users == nil {
		return fmt.Errorf("server: users cannot be added to a node started without them (restart it)")
	}
	s.tenantsMu.Lock()
	defer s.tenantsMu.Unlock()
	s.baseUsers = users.All()
	st := &tenants.State{}
	if s.tenants != nil {
		st = s.tenants.State()
	}
	s.publishUsers(st)
	s.publishACLs(st)
	return nil
}

// publishQuotas makes the config file's quotas with st's changes the quotas in force.
func (s *Server) publishQuotas(st *tenants.State) {
	s.quotas.Set(tenants.ApplyQuotas(s.cfg.Quotas, st))
}
