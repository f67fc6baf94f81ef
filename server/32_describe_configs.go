package server

import (
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/topicconfig"
)

// DescribeConfigs v0-v4: complete config sets for topics and for the broker, with sources
// and synonyms (v1+) and types and documentation (v3+), the way Kafka's ConfigHelper builds
// them, because Kafka Connect and Materialize read them to judge topics (Connect's internal
// topics must be compact; both read broker defaults). A topic config's value is its override
// (DYNAMIC_TOPIC_CONFIG), else the broker's setting (STATIC_BROKER_CONFIG when Inlet's flags
// set it), else Kafka's default (DEFAULT_CONFIG); synonyms list the same chain.
const describeConfigsKey = 32

func init() {
	register(api{key: describeConfigsKey, min: 0, max: 4, handle: handleDescribeConfigs})
}

// Config resource types (ConfigResource.Type) and sources (DescribeConfigsResponse.ConfigSource).
const (
	resourceTopic  = 2
	resourceBroker = 4

	sourceDynamicTopic = 1
	sourceStaticBroker = 4
	sourceDefault      = 5
)

const (
	errInvalidConfig          int16 = 40
	errTopicAlreadyExists     int16 = 36
	errInvalidPartitions      int16 = 37
	errInvalidReplicationFact int16 = 38
	errInvalidReplicaAssign   int16 = 39
	errUnknownTopicID         int16 = 100
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

// brokerSetting is a broker config Inlet's own flags decide (source STATIC_BROKER_CONFIG),
// or nil when Kafka's default stands.
func (s *Server) brokerSetting(name string) *string {
	switch name {
	case "message.max.bytes":
		if s.cfg.MaxMessageBytes != defaultMaxMessageBytes {
			return strp(strconv.Itoa(s.cfg.MaxMessageBytes))
		}
	}
	return nil
}

// topicConfigs is every topic config of t (nil: the defaults a new topic would get, with
// overrides) as Kafka describes them.
func (s *Server) topicConfigs(overrides map[string]string) []configEntry {
	out := make([]configEntry, 0, len(topicconfig.Defs()))
	for _, d := range topicconfig.Defs() {
		e := configEntry{name: d.Name, typ: d.Type, doc: d.Doc}
		if v, ok := overrides[d.Name]; ok {
			e.value, e.source = strp(v), sourceDynamicTopic
			e.synonyms = append(e.synonyms, synonym(d.Name, strp(v), sourceDynamicTopic))
		}
		last := d.Synonyms[len(d.Synonyms)-1]
		if bv := s.brokerSetting(d.Synonyms[0]); bv != nil {
			if e.value == nil {
				e.value, e.source = bv, sourceStaticBroker
			}
			e.synonyms = append(e.synonyms, synonym(d.Synonyms[0], bv, sourceStaticBroker))
		}
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

// brokerConfigs is the broker's config set: Inlet's settings and the broker-level defaults
// behind every topic config. All read-only: Inlet takes no dynamic broker configs.
func (s *Server) brokerConfigs() []configEntry {
	static := func(name, v string, typ topicconfig.Type) configEntry {
		return configEntry{name: name, value: strp(v), source: sourceStaticBroker, readOnly: true, typ: typ}
	}
	def := func(name, v string, typ topicconfig.Type) configEntry {
		return configEntry{name: name, value: strp(v), source: sourceDefault, readOnly: true, typ: typ}
	}
	listener := "PLAINTEXT://" + net.JoinHostPort(s.advHost, strconv.Itoa(int(s.advPort)))
	out := []configEntry{
		static("broker.id", strconv.Itoa(int(s.cfg.NodeID)), topicconfig.Int),
		static("node.id", strconv.Itoa(int(s.cfg.NodeID)), topicconfig.Int),
		static("advertised.listeners", listener, topicconfig.String),
		static("listeners", "PLAINTEXT://"+s.addr.String(), topicconfig.String),
		static("num.partitions", strconv.Itoa(s.cfg.DefaultPartitions), topicconfig.Int),
		static("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), topicconfig.Boolean),
		static("socket.request.max.bytes", strconv.Itoa(s.cfg.MaxRequestBytes), topicconfig.Int),
		static("group.initial.rebalance.delay.ms", msString(s.cfg.GroupInitialRebalanceDelay), topicconfig.Int),
		static("max.connections", strconv.Itoa(s.cfg.MaxConnections), topicconfig.Int),
		static("max.connections.per.ip", strconv.Itoa(s.cfg.MaxConnectionsPerIP), topicconfig.Int),
		static("max.connections.per.ip.overrides", perIPOverridesString(s.cfg.MaxConnectionsPerIPOverrides), topicconfig.String),
		static("connections.max.idle.ms", idleMs(s.cfg.ConnectionsMaxIdle), topicconfig.Long),
		static("sasl.server.max.receive.size", strconv.Itoa(s.cfg.SaslServerMaxReceiveSize), topicconfig.Int),
		static("connection.failed.authentication.delay.ms", msString(s.cfg.FailedAuthenticationDelay), topicconfig.Int),
		def("default.replication.factor", "1", topicconfig.Int),
		def("offsets.topic.replication.factor", "1", topicconfig.Int),
		def("transaction.state.log.replication.factor", "1", topicconfig.Int),
		def("transaction.state.log.min.isr", "1", topicconfig.Int),
		def("group.min.session.timeout.ms", "6000", topicconfig.Int),
		def("group.max.session.timeout.ms", "1800000", topicconfig.Int),
		def("offset.metadata.max.bytes", "4096", topicconfig.Int),
		def("offsets.retention.minutes", "10080", topicconfig.Int),
		def("log.retention.check.interval.ms", "300000", topicconfig.Long),
		def("delete.topic.enable", "true", topicconfig.Boolean),
	}
	seen := map[string]bool{}
	for _, e := range out {
		seen[e.name] = true
	}
	for _, d := range topicconfig.Defs() {
		for i, name := range d.Synonyms {
			if seen[name] {
				continue
			}
			seen[name] = true
			e := configEntry{name: name, typ: d.Type, readOnly: true, source: sourceDefault}
			switch {
			case s.brokerSetting(name) != nil:
				e.value, e.source = s.brokerSetting(name), sourceStaticBroker
			case i == len(d.Synonyms)-1 && d.BrokerDefault != "":
				e.value = strp(d.BrokerDefault)
			case i == len(d.Synonyms)-1:
				e.value = strp(d.Default)
			}
			// Earlier synonyms of a chain (log.retention.ms before log.retention.hours) are
			// unset (null), as in Kafka.
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func handleDescribeConfigs(s *Server, r *request, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		or := kmsg.NewDescribeConfigsResponseResource()
		or.ResourceType, or.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []configEntry
		switch rr.ResourceType {
		case resourceTopic:
			t, ok := s.blog.Topic(rr.ResourceName)
			if !ok {
				or.ErrorCode = errUnknownTopicOrPartition
				or.ErrorMessage = strp("Topic " + rr.ResourceName + " does not exist")
				break
			}
			entries = s.topicConfigs(t.Configs)
		case resourceBroker:
			switch rr.ResourceName {
			case "":
				// The cluster-wide dynamic defaults: none.
			case strconv.Itoa(int(s.cfg.NodeID)):
				entries = s.brokerConfigs()
			default:
				or.ErrorCode = errInvalidRequest
				or.ErrorMessage = strp("unexpected broker id, expected " + strconv.Itoa(int(s.cfg.NodeID)))
			}
		default:
			or.ErrorCode = errInvalidRequest
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
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly = e.name, e.value, e.readOnly
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

// perIPOverridesString is max.connections.per.ip.overrides as Kafka writes it, sorted.
func perIPOverridesString(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for ip, n := range m {
		parts = append(parts, ip+":"+strconv.Itoa(n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
