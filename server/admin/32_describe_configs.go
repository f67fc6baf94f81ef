package admin

import (
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/acl"
	"inlet/groups"
	"inlet/meta"
	"inlet/topicconfig"
	"inlet/txn"
	"inlet/wire"
)

// DescribeConfigs v0-v4: complete config sets for topics and for the broker, with sources
// and synonyms (v1+) and types and documentation (v3+), the way Kafka's ConfigHelper builds
// them, because Kafka Connect and Materialize read them to judge topics (Connect's internal
// topics must be compact; both read broker defaults). A topic config's value is its override
// (DYNAMIC_TOPIC_CONFIG), else the broker config it falls back to: this broker's dynamic
// setting (DYNAMIC_BROKER_CONFIG), the cluster default's (DYNAMIC_DEFAULT_BROKER_CONFIG),
// Inlet's flags (STATIC_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG); synonyms list
// the same chain. Broker configs carry Kafka's documentation (topicconfig.BrokerDefs); the
// dynamic ones are not read-only.
const describeConfigsKey = 32

func init() {
	register(API{Key: describeConfigsKey, Min: 0, Max: 4, Handle: handleDescribeConfigs,
		Authz: before(authorizeDescribeConfigs, onTopics(acl.DescribeConfigs))})
}

// Config resource types (ConfigResource.Type) and sources (DescribeConfigsResponse.ConfigSource).
const (
	resourceTopic  = 2
	resourceBroker = 4

	sourceDynamicTopic         = 1
	sourceDynamicBroker        = 2
	sourceDynamicDefaultBroker = 3
	sourceStaticBroker         = 4
	sourceDefault              = 5
)

// configEntry is one config as DescribeConfigs and CreateTopics v5+ report it.
type configEntry struct {
	name     string
	value    *string
	source   int8
	readOnly bool
	typ      topicconfig.Type
	doc      string
	synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
}

func strp(s string) *string { return &s }

func synonym(name string, value *string, source int8) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, value, kmsg.ConfigSource(source)
	return s
}

// staticBrokerConfigs are the broker configs Inlet's flags and config file decide (source
// STATIC_BROKER_CONFIG); Kafka's defaults stand for the others.
func (s *Server) staticBrokerConfigs() map[string]string {
	advHost, advPort := s.net.Advertised()
	listener := "PLAINTEXT://" + net.JoinHostPort(advHost, strconv.Itoa(int(advPort)))
	m := map[string]string{
		"broker.id":                                 strconv.Itoa(int(s.cfg.NodeID)),
		"node.id":                                   strconv.Itoa(int(s.cfg.NodeID)),
		"advertised.listeners":                      listener,
		"listeners":                                 "PLAINTEXT://" + s.net.Addr(),
		"num.partitions":                            strconv.Itoa(s.cfg.DefaultPartitions),
		"auto.create.topics.enable":                 strconv.FormatBool(s.cfg.AutoCreateTopics),
		"socket.request.max.bytes":                  strconv.Itoa(s.cfg.MaxRequestBytes),
		"group.initial.rebalance.delay.ms":          msString(s.cfg.GroupInitialRebalanceDelay),
		"max.connections":                           strconv.Itoa(s.cfg.MaxConnections),
		"max.connections.per.ip":                    strconv.Itoa(s.cfg.MaxConnectionsPerIP),
		"max.connections.per.ip.overrides":          perIPOverridesString(s.cfg.MaxConnectionsPerIPOverrides),
		"connections.max.idle.ms":                   idleMs(s.cfg.ConnectionsMaxIdle),
		"sasl.server.max.receive.size":              strconv.Itoa(s.cfg.SaslServerMaxReceiveSize),
		"fetch.max.bytes":                           strconv.Itoa(s.cfg.FetchMaxBytes),
		"connection.failed.authentication.delay.ms": msString(s.cfg.FailedAuthenticationDelay),
		"super.users":                               superUsersString(s.cfg.SuperUsers),
		"producer.id.expiration.ms":                 idleMs(s.cfg.Upkeep.ProducerExpiration()),
		"offsets.retention.minutes":                 retentionMinutes(s.cfg.OffsetsRetention),
		"transactional.id.expiration.ms":            txnIDExpirationMs(s.cfg.TransactionalIDExpiration),
		"log.retention.check.interval.ms":           idleMs(s.cfg.Upkeep.CheckInterval()),
		"log.diskless.enable":                       strconv.FormatBool(s.cfg.DisklessDefault),
		// One node: every replication factor and ISR minimum is 1.
		"default.replication.factor":               "1",
		"offsets.topic.replication.factor":         "1",
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
	}
	if s.cfg.MaxMessageBytes != 0 {
		m["message.max.bytes"] = strconv.Itoa(s.cfg.MaxMessageBytes)
	}
	return m
}

// brokerLevels are where a broker config's value may come from, most specific first: this
// broker's dynamic configs, the cluster default's, Inlet's static settings.
type brokerLevels struct {
	node, clusterDefault, static map[string]string
}

func (s *Server) brokerLevels() brokerLevels {
	return brokerLevels{
		node:           s.blog.BrokerConfigs(meta.BrokerNode),
		clusterDefault: s.blog.BrokerConfigs(meta.BrokerClusterDefault),
		static:         s.staticBrokerConfigs(),
	}
}

type brokerLevel struct {
	m      map[string]string
	source int8
}

// list is the levels, most specific first.
func (b brokerLevels) list() []brokerLevel {
	return []brokerLevel{{b.node, sourceDynamicBroker}, {b.clusterDefault, sourceDynamicDefaultBroker}, {b.static, sourceStaticBroker}}
}

// each calls f for every level that sets name, most specific first.
func (b brokerLevels) each(name string, f func(v string, source int8)) {
	for _, l := range b.list() {
		if v, ok := l.m[name]; ok {
			f(v, l.source)
		}
	}
}

// topicConfigs is every topic config of a topic with overrides as Kafka describes it: the
// override, else the broker configs it falls back to (each level, each synonym), else
// Kafka's default. levels are read once per request (brokerLevels).
func (s *Server) topicConfigs(levels brokerLevels, overrides map[string]string) []configEntry {
	out := make([]configEntry, 0, len(topicconfig.Defs()))
	for _, d := range topicconfig.Defs() {
		e := configEntry{name: d.Name, typ: d.Type, doc: d.Doc}
		if v, ok := overrides[d.Name]; ok {
			e.value, e.source = strp(v), sourceDynamicTopic
			e.synonyms = append(e.synonyms, synonym(d.Name, strp(v), sourceDynamicTopic))
		}
		// The most specific synonym at any level wins, then the most specific level
		// (topicconfig.TopicDefaults, which the log acts on).
		for _, name := range d.Synonyms {
			for _, l := range levels.list() {
				v, ok := l.m[name]
				if !ok {
					continue
				}
				e.synonyms = append(e.synonyms, synonym(name, strp(v), l.source))
				if d.StaticSynonym && l.source == sourceStaticBroker {
					// Resolved into the topic's overrides at creation (diskless.enable:
					// WithDisklessDefault): today's flag does not say what an older topic is.
					continue
				}
				bd, _ := topicconfig.LookupBroker(name)
				if tv, err := bd.TopicValue(v); err == nil && e.value == nil {
					e.value, e.source = strp(tv), l.source
				}
			}
		}
		last := d.Synonyms[len(d.Synonyms)-1]
		bdef := d.Default
		if d.BrokerDefault != "" {
			bdef = d.BrokerDefault
		}
		e.synonyms = append(e.synonyms, synonym(last, strp(bdef), sourceDefault))
		if e.value == nil {
			e.value, e.source = strp(d.Default), sourceDefault
		}
		out = append(out, e)
	}
	return out
}

// brokerConfigs is the broker's config set with Kafka's documentation: the dynamic ones
// (changed by IncrementalAlterConfigs) are not read-only. clusterDefault describes the
// cluster-default resource (name ""): only the configs set there, as Kafka lists them.
func (s *Server) brokerConfigs(levels brokerLevels, clusterDefault bool) []configEntry {
	if clusterDefault {
		levels = brokerLevels{clusterDefault: levels.clusterDefault}
	}
	var out []configEntry
	for _, d := range topicconfig.BrokerDefs() {
		e := configEntry{name: d.Name, typ: d.Type, doc: d.Doc, readOnly: !d.Dynamic}
		levels.each(d.Name, func(v string, source int8) {
			if e.value == nil {
				e.value, e.source = strp(v), source
			}
			e.synonyms = append(e.synonyms, synonym(d.Name, strp(v), source))
		})
		if clusterDefault && e.value == nil {
			continue
		}
		if !d.Null {
			e.synonyms = append(e.synonyms, synonym(d.Name, strp(d.Default), sourceDefault))
		}
		if e.value == nil {
			e.source = sourceDefault
			if !d.Null {
				e.value = strp(d.Default)
			}
		}
		out = append(out, e)
	}
	return out
}

func handleDescribeConfigs(s *Server, r *Request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	levels := s.brokerLevels()
	// super.users names the principals that may act on every tenant: only they (and
	// unrestricted connections) see it; others get it as Kafka gives a sensitive config,
	// with no value.
	hideSuperUsers := principal(r) != nil && !s.isSuperUser(r)
	for _, rr := range req.Resources {
		or := kmsg.NewDescribeConfigsResponseResource()
		or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []configEntry
		switch rr.ResourceType {
		case resourceTopic:
			t, ok := s.blog.Topic(rr.ResourceName)
			if !ok {
				or.ErrorCode = wire.ErrUnknownTopicOrPartition
				or.ErrorMessage = strp("Topic " + rr.ResourceName + " does not exist")
				break
			}
			entries = s.topicConfigs(levels, t.Configs)
		case resourceBroker:
			switch rr.ResourceName {
			case "":
				entries = s.brokerConfigs(levels, true)
			case strconv.Itoa(int(s.cfg.NodeID)):
				entries = s.brokerConfigs(levels, false)
			default:
				or.ErrorCode = wire.ErrInvalidRequest
				or.ErrorMessage = strp("unexpected broker id, expected " + strconv.Itoa(int(s.cfg.NodeID)))
			}
		default:
			or.ErrorCode = wire.ErrInvalidRequest
			or.ErrorMessage = strp("unsupported resource type")
		}
		want := map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !want[e.name] {
				continue
			}
			if hideSuperUsers && e.name == "super.users" {
				e.value, e.synonyms = nil, sensitiveSynonyms(e.synonyms)
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly = e.name, e.value, e.readOnly
			c.IsSensitive = hideSuperUsers && e.name == "super.users"
			c.Source = kmsg.ConfigSource(e.source)
			c.IsDefault = e.source == sourceDefault
			if req.IncludeSynonyms {
				c.ConfigSynonyms = e.synonyms
			}
			c.ConfigType = kmsg.ConfigType(e.typ)
			if req.IncludeDocumentation && e.doc != "" {
				c.Documentation = strp(e.doc)
			}
			or.Configs = append(or.Configs, c)
		}
		resp.Resources = append(resp.Resources, or)
	}
	return resp, nil
}

// sensitiveSynonyms is syns without their values.
func sensitiveSynonyms(syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	out := make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, len(syns))
	for i, sy := range syns {
		sy.Value = nil
		out[i] = sy
	}
	return out
}

// msString is a duration setting in Kafka's milliseconds; a negative one (none) is 0.
func msString(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 0), 10)
}

// idleMs is connections.max.idle.ms: -1 when idle connections are never closed.
func idleMs(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// superUsersString is super.users as Kafka writes it.
func superUsersString(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = "User:" + n
	}
	return strings.Join(parts, ";")
}

// perIPOverridesString is max.connections.per.ip.overrides as Kafka writes it, sorted.
func perIPOverridesString(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for ip, n := range m {
		parts = append(parts, ip+":"+strconv.Itoa(n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// retentionMinutes is offsets.retention.minutes as configured (-1: never).
func retentionMinutes(d time.Duration) string {
	switch {
	case d < 0:
		return "-1"
	case d == 0:
		d = groups.DefaultOffsetsRetention
	}
	return strconv.FormatInt(int64(d/time.Minute), 10)
}

// txnIDExpirationMs is transactional.id.expiration.ms as configured (-1: never).
func txnIDExpirationMs(d time.Duration) string { return expirationMs(d, txn.DefaultIDExpiration) }

// expirationMs is an expiration time in ms as configured (def when unset, -1: never).
func expirationMs(d, def time.Duration) string {
	switch {
	case d < 0:
		return "-1"
	case d == 0:
		d = def
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}
