package diskless

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/tenants"
)

// The node's run-time users, ACLs and quotas (tenants.json) and its dynamic broker configs
// change rarely, and each change is small: each goes, whole, into the next commit object as a
// state entry (StateTenants, StateBrokerConfigs), and the change is answered, and made durable
// on the node, only once that object is in the bucket (putState, as group offsets: the
// node's copy is never ahead of the bucket). A start keeps the last of each kind in the log
// and writes it over the node's copy (stateFold.apply), before the admin APIs load them.
//
//	StateTenants        payload: tenants.State as JSON (tenants.json's content)
//	StateBrokerConfigs  payload: level u8 (meta.BrokerLevel), then the configs as a JSON object
//	StateProducerIDs    payload: the end of a reserved block of producer ids, u64
//
// Producer ids are handed out from blocks (meta.Store.AllocateProducerID): each block's end is
// put in the bucket before the first id of it is handed out (KeepProducerIDs), so that a node
// restored from the bucket starts past every id an earlier node may have handed out, also to a
// producer that had not written a batch yet (whose id no replayed batch or transaction names).

// KeepTenants puts the tenants state st in the bucket (admin.Diskless): called with the state
// a change makes, before it is written to tenants.json and answered.
func (c *Committer) KeepTenants(st *tenants.State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return c.putState(StateTenants, b)
}

// KeepBrokerConfigs puts level's dynamic broker configs in the bucket (admin.Diskless):
// called before they are stored and answered.
func (c *Committer) KeepBrokerConfigs(level meta.BrokerLevel, configs map[string]string) error {
	if level != meta.BrokerNode && level != meta.BrokerClusterDefault {
		return fmt.Errorf("diskless: broker config level %d", level)
	}
	b, err := json.Marshal(configs)
	if err != nil {
		return err
	}
	return c.putState(StateBrokerConfigs, append([]byte{byte(level)}, b...))
}

// KeepProducerIDs puts the end of a block of producer ids in the bucket
// (meta.Store.SetProducerIDReserver): called before the block's first id is handed out.
func (c *Committer) KeepProducerIDs(end int64) error {
	return c.putState(StateProducerIDs, binary.BigEndian.AppendUint64(nil, uint64(end)))
}

// stateFold is what a start keeps of the log's state entries: the group changes folded, and
// the last tenants state and broker configs of each level (nil: none in the log).
type stateFold struct {
	groups  groupsFold
	txns    txnFold
	tenants *tenants.State
	brokers [2]map[string]string
	set     [2]bool
	pidEnd  int64  // the end of the last block of producer ids reserved; 0: none
	at      uint64 // the state entries folded: each deletion notes when it was
}

var errBadState = errors.New("diskless: a state entry does not decode")

func (f *stateFold) add(kind int32, payload []byte) error {
	f.at++
	switch kind {
	case StateGroupOffsets:
		return f.groups.add(payload, f.at)
	case StateTxn:
		return f.txns.add(payload, f.at)
	case StateGroupRecords:
		return f.groups.addRecords(payload)
	case StateTenants:
		var st tenants.State
		if err := json.Unmarshal(payload, &st); err != nil {
			return fmt.Errorf("%w: tenants: %v", errBadState, err)
		}
		f.tenants = &st
	case StateBrokerConfigs:
		if len(payload) < 1 || payload[0] > byte(meta.BrokerClusterDefault) {
			return fmt.Errorf("%w: broker configs", errBadState)
		}
		var m map[string]string
		if err := json.Unmarshal(payload[1:], &m); err != nil {
			return fmt.Errorf("%w: broker configs: %v", errBadState, err)
		}
		f.brokers[payload[0]], f.set[payload[0]] = m, true
	case StateProducerIDs:
		if len(payload) != 8 || int64(binary.BigEndian.Uint64(payload)) < 0 {
			return fmt.Errorf("%w: producer id block", errBadState)
		}
		f.pidEnd = max(f.pidEnd, int64(binary.BigEndian.Uint64(payload)))
	default:
		return fmt.Errorf("%w: kind %d", errBadState, kind)
	}
	return nil
}

// dropCarried lets go of the deletions folded at or before entry through (groupsFold's).
func (f *stateFold) dropCarried(through uint64) {
	f.groups.dropCarried(through)
	f.txns.dropCarried(through)
}

// apply writes the last tenants state and broker configs of the log over the node's (the
// groups' offsets are applied by Recover); a kind the log has none of is left as it is.
func (f *stateFold) apply(l *batchlog.Log) error {
	for level, set := range f.set {
		if set && !maps.Equal(l.BrokerConfigs(meta.BrokerLevel(level)), f.brokers[level]) {
			if err := l.SetBrokerConfigs(meta.BrokerLevel(level), f.brokers[level]); err != nil {
				return fmt.Errorf("diskless: dynamic broker configs: %w", err)
			}
		}
	}
	if f.tenants == nil || l.Dir() == "" {
		return nil
	}
	ts, err := tenants.Open(filepath.Join(l.Dir(), tenants.FileName))
	if err != nil {
		return err
	}
	_, err = ts.Change(func(st *tenants.State) (bool, error) {
		was, err := json.Marshal(st)
		if err != nil {
			return false, err
		}
		now, err := json.Marshal(f.tenants)
		if err != nil || bytes.Equal(was, now) {
			return false, err // the node's own disk, as it was: not written again
		}
		*st = *f.tenants
		return true, nil
	})
	return err
}
