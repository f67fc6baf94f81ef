package server

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/quota"
	"inlet/tenants"
	"inlet/wire"
)

// AlterClientQuotas v0-v1 (KIP-546): sets and removes producer_byte_rate and
// consumer_byte_rate of a user or the default user, durably (package tenants), for
// connections already open too. Kafka's other quota keys (request_percentage,
// controller_mutation_rate, connection_creation_rate) and client-id and ip entities are not
// enforced here, and are refused with INVALID_REQUEST rather than stored and ignored.
// Changing quotas needs a super user on a listener with security (Kafka needs ALTER_CONFIGS
// on the cluster); on one without, anyone may, as on a Kafka broker without an authorizer.
const alterClientQuotasKey = 49

func init() {
	register(api{key: alterClientQuotasKey, min: 0, max: 1, handle: handleAlterClientQuotas,
		authz: inHandler(onCluster(acl.Alter))})
}

func handleAlterClientQuotas(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	code, msg := int16(0), ""
	switch {
	case s.tenants == nil:
		code, msg = wire.ErrInvalidRequest, "Quotas cannot be changed: this node keeps no data directory."
	case r.c.sec != nil && !s.isSuperUser(r):
		code, msg = wire.ErrClusterAuthorizationFailed, "Only super.users may alter quotas."
	}
	type change struct {
		entity, key string
		value       *float64
	}
	var changes []change
	ok := make([]bool, len(req.Entries))
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, ent := range e.Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = ent.Type, ent.Name
			re.Entity = append(re.Entity, oe)
		}
		entity, ecode, emsg := quotaEntity(e.Entity)
		var mine []change
		if ecode == 0 {
			seen := map[string]bool{}
			for _, op := range e.Ops {
				if _, known := quota.KindOf(op.Key); !known {
					ecode, emsg = wire.ErrInvalidRequest, "Quota key "+op.Key+" is not enforced by this node: only producer_byte_rate and consumer_byte_rate are."
					break
				}
				if seen[op.Key] {
					ecode, emsg = wire.ErrInvalidRequest, "Duplicate quota key "+op.Key
					break
				}
				seen[op.Key] = true
				if op.Remove {
					mine = append(mine, change{entity, op.Key, nil})
					continue
				}
				if op.Value < 1 || op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt64 {
					ecode, emsg = wire.ErrInvalidRequest, "Quota "+op.Key+" must be a whole number of bytes per second, at least 1"
					break
				}
				v := op.Value
				mine = append(mine, change{entity, op.Key, &v})
			}
		}
		switch {
		case code != 0:
			re.ErrorCode, re.ErrorMessage = code, strp(msg)
		case ecode != 0:
			re.ErrorCode, re.ErrorMessage = ecode, strp(emsg)
		default:
			changes = append(changes, mine...)
			ok[i] = true
		}
		resp.Entries = append(resp.Entries, re)
	}
	if len(changes) > 0 && !req.ValidateOnly {
		err := s.changeTenants(func(st *tenants.State) (bool, error) {
			changed := false
			for _, c := range changes {
				if st.SetQuota(c.entity, c.key, c.value, s.cfg.Quotas) {
					changed = true
				}
			}
			return changed, nil
		})
		if err != nil {
			s.log.Error("alter client quotas", "err", err)
			for i := range resp.Entries {
				if ok[i] {
					resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = wire.ErrUnknownServerError, strp("The quotas could not be stored: "+err.Error())
				}
			}
			return resp, nil
		}
		s.log.Info("altered client quotas", "changes", len(changes))
	}
	return resp, nil
}

// quotaEntity is the quota entity name of a request's entity: a user's name, or
// quota.DefaultUser.
func quotaEntity(ent []kmsg.AlterClientQuotasRequestEntryEntity) (string, int16, string) {
	if len(ent) != 1 {
		return "", wire.ErrInvalidRequest, "Only user quotas are served by this node: an entity is one user (or the default user)"
	}
	switch ent[0].Type {
	case entityUser:
	case entityClientID, entityIP:
		return "", wire.ErrInvalidRequest, "Only user quotas are served by this node, not " + ent[0].Type + " quotas"
	default:
		return "", wire.ErrInvalidRequest, "Unknown quota entity type " + ent[0].Type
	}
	if ent[0].Name == nil {
		return quota.DefaultUser, 0, ""
	}
	if *ent[0].Name == "" || *ent[0].Name == quota.DefaultUser {
		return "", wire.ErrInvalidRequest, "Invalid user name " + *ent[0].Name
	}
	return *ent[0].Name, 0, ""
}
