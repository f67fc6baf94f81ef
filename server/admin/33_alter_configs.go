package admin

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/batchlog"
	"inlet/meta"
	"inlet/topicconfig"
	"inlet/wire"
)

// AlterConfigs v0-v2: replaces a topic's whole set of overrides, or the broker's dynamic
// configs (this broker's, or the cluster default's for the empty name), as the legacy,
// non-incremental API does: configs not named go back to their defaults. v1 validate-only
// semantics are the same as v0's flag.
const alterConfigsKey = 33

func init() {
	register(API{Key: alterConfigsKey, Min: 0, Max: 2, Handle: handleAlterConfigs,
		Authz: before(authorizeAlterConfigs, onTopics(acl.AlterConfigs), onCluster(acl.Describe))})
}

func handleAlterConfigs(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		or := kmsg.NewAlterConfigsResponseResource()
		or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
		configs := map[string]string{}
		var dup bool
		for _, c := range rr.Configs {
			if _, ok := configs[c.Name]; ok {
				dup = true
			}
			if c.Value != nil {
				configs[c.Name] = *c.Value
			} else {
				configs[c.Name] = ""
			}
		}
		code, msg := int16(0), ""
		if dup {
			code, msg = wire.ErrInvalidRequest, "Error due to duplicate config keys"
		} else {
			code, msg = s.applyConfigs(r, rr.ResourceType, rr.ResourceName, func(map[string]string) (map[string]string, int16, string) {
				for _, c := range rr.Configs {
					if c.Value == nil {
						return nil, wire.ErrInvalidRequest, fmt.Sprintf("Null value not supported for : %s", c.Name)
					}
				}
				return configs, 0, ""
			}, req.ValidateOnly)
		}
		or.ErrorCode = code
		if code != 0 {
			or.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, or)
	}
	return resp, nil
}

// applyConfigs computes a resource's new configs with change (given the current ones: a
// topic's overrides, or the broker's dynamic configs at one level), validates them and,
// unless validateOnly, stores them.
func (s *Server) applyConfigs(r *Request, typ kmsg.ConfigResourceType, name string, change func(cur map[string]string) (map[string]string, int16, string), validateOnly bool) (int16, string) {
	switch typ {
	case resourceTopic:
	case resourceBroker:
		return s.applyBrokerConfigs(r, name, change, validateOnly)
	default:
		return wire.ErrInvalidRequest, "unsupported resource type"
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	t, ok := s.blog.Topic(name)
	if !ok {
		return wire.ErrUnknownTopicOrPartition, "Topic " + name + " does not exist"
	}
	cur := map[string]string{}
	for k, v := range t.Configs {
		cur[k] = v
	}
	next, code, msg := change(cur)
	if code != 0 {
		return code, msg
	}
	if err := topicconfig.ValidateAll(next); err != nil {
		return wire.ErrInvalidConfig, err.Error()
	}
	if err := topicconfig.CheckCombination(next, s.remote); err != nil {
		return wire.ErrInvalidConfig, err.Error()
	}
	if err := topicconfig.CheckDisklessChange(t.Configs, next); err != nil { // change may edit cur in place
		return wire.ErrInvalidConfig, err.Error()
	}
	if validateOnly {
		return 0, ""
	}
	nt, err := s.blog.SetTopicConfigs(name, next)
	if err == nil {
		// The local change stands whatever the bucket answers; the next commit object of
		// the topic is preceded by its description in any case (package diskless).
		if code, msg := s.describe(nt); code != 0 {
			return code, msg
		}
	}
	if err != nil {
		if errors.Is(err, batchlog.ErrUnknownTopic) {
			return wire.ErrUnknownTopicOrPartition, "Topic " + name + " does not exist"
		}
		s.log.Error("alter configs", "topic", name, "err", err)
		return wire.ErrUnknownServerError, err.Error()
	}
	s.log.Info("altered topic configs", "topic", name, "configs", next)
	return 0, ""
}

// applyBrokerConfigs changes the dynamic broker configs of this broker (name: its id) or of
// the cluster default (name ""). It needs a principal that may act on the cluster (Kafka's
// ALTER_CONFIGS on CLUSTER): a super user, one scoped to every topic, or any client of a
// listener without security.
func (s *Server) applyBrokerConfigs(r *Request, name string, change func(cur map[string]string) (map[string]string, int16, string), validateOnly bool) (int16, string) {
	level := meta.BrokerNode
	switch name {
	case strconv.Itoa(int(s.cfg.NodeID)):
	case "":
		level = meta.BrokerClusterDefault
	default:
		return wire.ErrInvalidRequest, "unexpected broker id, expected " + strconv.Itoa(int(s.cfg.NodeID))
	}
	if !s.seesAllTenants(r) {
		return wire.ErrClusterAuthorizationFailed, "Altering broker configs needs a super user."
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	cur := s.blog.BrokerConfigs(level)
	if cur == nil {
		cur = map[string]string{}
	}
	next, code, msg := change(cur)
	if code != 0 {
		return code, msg
	}
	for k, v := range next {
		if err := topicconfig.ValidateBroker(k, v); err != nil {
			if d, ok := topicconfig.LookupBroker(k); ok && !d.Dynamic {
				return wire.ErrInvalidRequest, err.Error()
			}
			return wire.ErrInvalidConfig, err.Error()
		}
	}
	if validateOnly {
		return 0, ""
	}
	if s.diskless != nil {
		// In the bucket before it is made and answered (diskless/node_state.go).
		if err := s.diskless.KeepBrokerConfigs(level, next); err != nil {
			s.log.Error("alter broker configs: not in the bucket", "err", err)
			return wire.ErrKafkaStorageError, err.Error()
		}
	}
	if err := s.blog.SetBrokerConfigs(level, next); err != nil {
		s.log.Error("alter broker configs", "err", err)
		return wire.ErrUnknownServerError, err.Error()
	}
	s.log.Info("altered dynamic broker configs", "broker", name, "configs", next)
	return 0, ""
}
