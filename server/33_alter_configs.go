package server

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/topicconfig"
)

// AlterConfigs v0-v2: replaces a topic's whole set of overrides (the legacy, non-incremental
// API: configs not named go back to their defaults). Broker configs are static here
// (INVALID_REQUEST). v1 validate-only semantics are the same as v0's flag.
const alterConfigsKey = 33

func init() {
	register(api{key: alterConfigsKey, min: 0, max: 2, handle: handleAlterConfigs})
}

func handleAlterConfigs(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
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
			code, msg = errInvalidRequest, "Error due to duplicate config keys"
		} else {
			code, msg = s.applyConfigs(rr.ResourceType, rr.ResourceName, func(map[string]string) (map[string]string, int16, string) {
				for _, c := range rr.Configs {
					if c.Value == nil {
						return nil, errInvalidRequest, fmt.Sprintf("Null value not supported for : %s", c.Name)
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

// applyConfigs computes a resource's new topic overrides with change (given the current
// ones), validates them and, unless validateOnly, stores them.
func (s *Server) applyConfigs(typ kmsg.ConfigResourceType, name string, change func(cur map[string]string) (map[string]string, int16, string), validateOnly bool) (int16, string) {
	switch typ {
	case resourceTopic:
	case resourceBroker:
		if name != "" && name != strconv.Itoa(int(s.cfg.NodeID)) {
			return errInvalidRequest, "unexpected broker id, expected " + strconv.Itoa(int(s.cfg.NodeID))
		}
		return errInvalidRequest, "Inlet's broker configs are static (set by its flags); they cannot be altered"
	default:
		return errInvalidRequest, "unsupported resource type"
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	t, ok := s.blog.Topic(name)
	if !ok {
		return errUnknownTopicOrPartition, "Topic " + name + " does not exist"
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
		return errInvalidConfig, err.Error()
	}
	if validateOnly {
		return 0, ""
	}
	if _, err := s.blog.SetTopicConfigs(name, next); err != nil {
		if errors.Is(err, batchlog.ErrUnknownTopic) {
			return errUnknownTopicOrPartition, "Topic " + name + " does not exist"
		}
		s.log.Error("alter configs", "topic", name, "err", err)
		return errUnknownServerError, err.Error()
	}
	s.log.Info("altered topic configs", "topic", name, "configs", next)
	return 0, ""
}
