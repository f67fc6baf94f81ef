package batchlog

import (
	"maps"

	"inlet/meta"
	"inlet/topicconfig"
)

// Dynamic broker configs (IncrementalAlterConfigs and AlterConfigs on the broker resource):
// this broker's and the cluster default's, stored by the catalog (meta.Store.SaveBrokerConfigs)
// with a sync before they apply. They are the defaults of the topic configs they are
// synonyms of (log.retention.hours of retention.ms): every topic's Settings are parsed from
// its overrides over them, and parsed again when they change.

// BrokerConfigs returns the dynamic broker configs set at level (a copy).
func (l *Log) BrokerConfigs(level meta.BrokerLevel) map[string]string {
	l.topicsMu.RLock()
	defer l.topicsMu.RUnlock()
	return maps.Clone(l.brokerConfigs[level])
}

// SetBrokerConfigs replaces the dynamic broker configs of level (validated by the caller),
// durably, and re-parses every topic's settings over them.
func (l *Log) SetBrokerConfigs(level meta.BrokerLevel, configs map[string]string) error {
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	if err := l.meta.SaveBrokerConfigs(level, configs); err != nil {
		return err
	}
	l.brokerConfigs[level] = maps.Clone(configs)
	l.topicDefaults = topicconfig.TopicDefaults(l.brokerConfigs[meta.BrokerNode], l.brokerConfigs[meta.BrokerClusterDefault])
	for name, old := range l.topics {
		t := *old
		t.Settings = l.parse(old.Configs)
		l.topics[name] = &t
	}
	return nil
}

// loadBrokerConfigs reads the dynamic broker configs at open, before the topics.
func (l *Log) loadBrokerConfigs() error {
	bc, err := l.meta.BrokerConfigs()
	if err != nil {
		return err
	}
	l.brokerConfigs = bc
	l.topicDefaults = topicconfig.TopicDefaults(l.brokerConfigs[meta.BrokerNode], l.brokerConfigs[meta.BrokerClusterDefault])
	return nil
}

// parse is a topic's settings: its overrides over the dynamic broker defaults. topicsMu held
// (or the log not yet shared).
func (l *Log) parse(overrides map[string]string) topicconfig.Settings {
	if len(l.topicDefaults) == 0 {
		return topicconfig.Parse(overrides)
	}
	merged := maps.Clone(l.topicDefaults)
	maps.Copy(merged, overrides)
	return topicconfig.Parse(merged)
}
