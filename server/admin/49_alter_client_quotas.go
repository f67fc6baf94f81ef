package admin

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/quota"
	"inlet/tenants"
	"inlet/wire"
)

// AlterClientQuotas v0-v1 (KIP-546): sets and removes producer_byte_rate and
// consumer_byte_rate of any entity of KIP-55 (a user, a client id, or both, each named or
// the default; package quota resolves their precedence), durably (package tenants), for
// connections already open too. Kafka's other quota keys and ip entities are not enforced
// here, and are refused with INVALID_REQUEST rather than stored and ignored:
// request_percentage shares out the time of Kafka's request handler threads, which this node
// does not have (a connection's requests run on the workers of its event loop, and a
// request's cost there is not measured per client), and controller_mutation_rate and
// connection_creation_rate bound work a single node does not do or limits it sets
// elsewhere. Entities are checked as ClientQuotaControlManager checks them (no empty entity,
// no type twice, no empty name). Changing quotas needs a super user on a listener with
// security (Kafka needs ALTER_CONFIGS on the cluster); on one without, anyone may, as on a
// Kafka broker without an authorizer.
const alterClientQuotasKey = 49

func init() {
	register(API{Key: alterClientQuotasKey, Min: 0, Max: 1, Handle: handleAlterClientQuotas,
		Authz: inHandler(onCluster(acl.Alter))})
}

func handleAlterClientQuotas(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	code, msg := int16(0), ""
	switch {
	case s.tenants == nil:
		code, msg = wire.ErrInvalidRequest, "Quotas cannot be changed: this node keeps no data directory."
	case r.Conn.Security() != nil && !s.isSuperUser(r):
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
					ecode, emsg = wire.ErrInvalidRequest, "Quota key "+op.Key+" is not enforced by this node: only producer_byte_rate, consumer_byte_rate and controller_mutation_rate are."
					if op.Key == requestPercentage {
						ecode, emsg = wire.ErrInvalidRequest, "Quota key request_percentage is not enforced by this node: it shares out the time of Kafka's request handler threads, and here a connection's requests run on its event loop's workers, whose time is not measured per client. Only producer_byte_rate, consumer_byte_rate and controller_mutation_rate are."
					}
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

// requestPercentage is Kafka's request-time quota key (QuotaConfig), refused here.
const requestPercentage = "request_percentage"

// quotaEntity is the quota entity key (quota.EntityKey) of a request's entity: a user, a
// client id, or both, each a name or quota.DefaultUser (a null name).
func quotaEntity(ent []kmsg.AlterClientQuotasRequestEntryEntity) (string, int16, string) {
	if len(ent) == 0 {
		return "", wire.ErrInvalidRequest, "Invalid empty client quota entity"
	}
	var user, client string
	for _, e := range ent {
		var part *string
		switch e.Type {
		case entityUser:
			part = &user
		case entityClientID:
			part = &client
		case entityIP:
			return "", wire.ErrInvalidRequest, "ip quotas (connection_creation_rate) are not enforced by this node"
		default:
			return "", wire.ErrInvalidRequest, "Unhandled client quota entity type: " + e.Type
		}
		if *part != "" {
			return "", wire.ErrInvalidRequest, "Invalid client quota entity, duplicate entity entry " + e.Type
		}
		switch {
		case e.Name == nil:
			*part = quota.DefaultUser
		case *e.Name == "":
			return "", wire.ErrInvalidRequest, "Empty " + e.Type + " not supported"
		case *e.Name == quota.DefaultUser || !quota.ValidName(*e.Name):
			return "", wire.ErrInvalidRequest, "Invalid " + e.Type + " name " + *e.Name
		default:
			*part = *e.Name
		}
	}
	return quota.EntityKey(user, client), 0, ""
}
