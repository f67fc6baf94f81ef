package batchlog

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/cockroachdb/pebble/v2"

	"inlet/topicconfig"
)

// Dynamic broker configs (IncrementalAlterConfigs and AlterConfigs on the broker resource):
// this broker's and the cluster default's, each one JSON map in the metadata store, written
// with a sync before they apply. They are the defaults of the topic configs they are
// synonyms of (log.retention.hours of retention.ms): every topic's Settings are parsed from
// its overrides over them, and parsed again when they change.

// BrokerLevel is where a dynamic broker config is set.
type BrokerLevel int

const (
	BrokerNode           BrokerLevel = iota // this broker (resource name: its id)
	BrokerClusterDefault                    // every broker (resource name: empty)
)

var brokerConfigKeys = [2][]byte{
	{kindMeta, 'b', 'c', 'n'},
	{kindMeta, 'b', 'c', 'd'},
}

// BrokerConfigs returns the dynamic broker configs set at level (a copy).
func (l *Log) BrokerConfigs(level BrokerLevel) map[string]string {
	l.topicsMu.RLock()
	defer l.topicsMu.RUnlock()
	return maps.Clone(l.brokerConfigs[level])
}

// SetBrokerConfigs replaces the dynamic broker configs of level (validated by the caller),
// durably, and re-parses every topic's settings over them.
func (l *Log) SetBrokerConfigs(level BrokerLevel, configs map[string]string) error {
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	if l.db != nil {
		v, err := json.Marshal(configs)
		if err != nil {
			return err
		}
		if err := l.db.Set(brokerConfigKeys[level], v, pebble.Sync); err != nil {
			return fmt.Errorf("batchlog: dynamic broker configs: %w", err)
		}
	}
	l.brokerConfigs[level] = maps.Clone(configs)
	l.topicDefaults = topicconfig.TopicDefaults(l.brokerConfigs[BrokerNode], l.brokerConfigs[BrokerClusterDefault])
	for name, old := range l.topics {
		t := *old
		t.Settings = l.parse(old.Configs)
		l.topics[name] = &t
	}
	return nil
}

// loadBrokerConfigs reads the dynamic broker configs at open, before the topics.
func (l *Log) loadBrokerConfigs(get func([]byte) ([]byte, bool, error)) error {
	for level, key := range brokerConfigKeys {
		v, ok, err := get(key)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(v, &m); err != nil {
			l.skipBadKey("dynamic broker config", key, err) // Kafka's defaults stand
			continue
		}
		l.brokerConfigs[level] = m
	}
	l.topicDefaults = topicconfig.TopicDefaults(l.brokerConfigs[BrokerNode], l.brokerConfigs[BrokerClusterDefault])
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
