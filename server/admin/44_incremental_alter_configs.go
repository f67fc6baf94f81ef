package admin

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/topicconfig"
	"inlet/wire"
)

// IncrementalAlterConfigs v0-v1 (KIP-339): SET, DELETE (back to the default), APPEND and
// SUBTRACT (list configs only) on a topic's overrides, or on the broker's dynamic configs
// (33_alter_configs.go, applyBrokerConfigs), as ConfigAdminManager.prepareIncrementalConfigs
// does.
const incrementalAlterConfigsKey = 44

func init() {
	register(API{Key: incrementalAlterConfigsKey, Min: 0, Max: 1, Handle: handleIncrementalAlterConfigs,
		Authz: before(authorizeIncrementalAlterConfigs, onTopics(acl.AlterConfigs), onCluster(acl.Describe))})
}

func handleIncrementalAlterConfigs(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		or := kmsg.NewIncrementalAlterConfigsResponseResource()
		or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
		code, msg := s.applyConfigs(r, rr.ResourceType, rr.ResourceName, func(cur map[string]string) (map[string]string, int16, string) {
			seen := map[string]bool{}
			for _, c := range rr.Configs {
				if seen[c.Name] {
					return nil, wire.ErrInvalidRequest, "Error due to duplicate config keys"
				}
				seen[c.Name] = true
				typ, def, ok := configType(rr.ResourceType, c.Name)
				if !ok && rr.ResourceType == resourceBroker {
					return nil, wire.ErrInvalidConfig, "Unknown broker config name: " + c.Name
				}
				if !ok {
					return nil, wire.ErrInvalidConfig, "Unknown topic config name: " + c.Name
				}
				val := ""
				if c.Value != nil {
					val = *c.Value
				}
				switch c.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					if c.Value == nil {
						return nil, wire.ErrInvalidRequest, "Null value not supported for : " + c.Name
					}
					cur[c.Name] = val
				case kmsg.IncrementalAlterConfigOpDelete:
					delete(cur, c.Name)
				case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
					if typ != topicconfig.List {
						return nil, wire.ErrInvalidConfig, fmt.Sprintf("Config value append is not allowed for config key: %s", c.Name)
					}
					old, ok := cur[c.Name]
					if !ok {
						old = def
					}
					items := splitList(old)
					if c.Op == kmsg.IncrementalAlterConfigOpAppend {
						for _, v := range splitList(val) {
							if !contains(items, v) {
								items = append(items, v)
							}
						}
					} else {
						var keep []string
						for _, it := range items {
							if !contains(splitList(val), it) {
								keep = append(keep, it)
							}
						}
						items = keep
					}
					cur[c.Name] = strings.Join(items, ",")
				default:
					return nil, wire.ErrInvalidRequest, fmt.Sprintf("Unknown alter config operation %d", c.Op)
				}
			}
			return cur, 0, ""
		}, req.ValidateOnly)
		or.ErrorCode = code
		if code != 0 {
			or.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, or)
	}
	return resp, nil
}

// configType is the type and default of a topic or broker config.
func configType(resource kmsg.ConfigResourceType, name string) (topicconfig.Type, string, bool) {
	if resource == resourceBroker {
		d, ok := topicconfig.LookupBroker(name)
		if !ok {
			return 0, "", false
		}
		return d.Type, d.Default, true
	}
	d, ok := topicconfig.Lookup(name)
	if !ok {
		return 0, "", false
	}
	return d.Type, d.Default, true
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
