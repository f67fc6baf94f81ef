package meta

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Dynamic broker configs (IncrementalAlterConfigs and AlterConfigs on the broker resource):
// this broker's and the cluster default's, each one JSON map, written with a sync before they
// apply. The record log holds the ones in force, as the defaults of every topic's settings.

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

// BrokerConfigs reads the stored dynamic broker configs of both levels. One that does not
// decode is logged and skipped: Kafka's defaults stand.
func (s *Store) BrokerConfigs() ([2]map[string]string, error) {
	var out [2]map[string]string
	if s.db == nil {
		return out, nil
	}
	for level, key := range brokerConfigKeys {
		v, ok, err := s.get(key)
		if err != nil {
			return out, err
		}
		if !ok {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(v, &m); err != nil {
			s.skipBadKey("dynamic broker config", key, err)
			continue
		}
		out[level] = m
	}
	return out, nil
}

// SaveBrokerConfigs replaces the dynamic broker configs of level, synced.
func (s *Store) SaveBrokerConfigs(level BrokerLevel, configs map[string]string) error {
	if s.db == nil {
		return nil
	}
	v, err := json.Marshal(configs)
	if err != nil {
		return err
	}
	if err := s.db.Set(brokerConfigKeys[level], v, pebble.Sync); err != nil {
		return fmt.Errorf("meta: dynamic broker configs: %w", err)
	}
	return nil
}
