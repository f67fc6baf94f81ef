package batchlog

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// RestoredStart is where a partition of a topic rebuilt from the remote tier begins: its log
// start (the first uploaded batch) and its next offset (after the last uploaded batch), with
// nothing stored locally. The zero value is an empty partition.
type RestoredStart struct{ LogStart, Next int64 }

// RestoreTopic creates topic name with the given id (the zero id: a new one) and configs, its
// partitions starting as starts says (package tier's Restore): the high watermark and the next
// offset at Next, the log start at LogStart, the local log start at Next. The topic record and
// the partitions' keys are synced before it returns. Only before the node serves: nothing may
// append to the log meanwhile.
func (l *Log) RestoreTopic(name string, id [16]byte, configs map[string]string, starts []RestoredStart) (*Topic, error) {
	if len(starts) == 0 {
		return nil, fmt.Errorf("batchlog: topic %q needs at least one partition", name)
	}
	for i, s := range starts {
		if s.LogStart < 0 || s.Next < s.LogStart {
			return nil, fmt.Errorf("batchlog: restore topic %q partition %d: start %d, next %d", name, i, s.LogStart, s.Next)
		}
	}
	l.topicsMu.Lock()
	defer l.topicsMu.Unlock()
	if t, ok := l.topics[name]; ok {
		return t, ErrTopicExists
	}
	t := &Topic{Name: name, ID: id, Configs: configs, Settings: l.parse(configs)}
	if t.ID == ([16]byte{}) {
		_, _ = rand.Read(t.ID[:])
	}
	seq := l.partSeq
	b := l.db.NewBatch()
	defer b.Close()
	for i, s := range starts {
		p := &Partition{ID: seq, Topic: name, Index: int32(i), diskless: t.Settings.Diskless}
		// The partition is not published yet: nothing else reads these.
		p.next = s.Next
		p.hw.Store(s.Next)
		p.logStart.Store(s.LogStart)
		p.localStart.Store(s.Next)
		t.Partitions = append(t.Partitions, p)
		var k [highKeyLen]byte
		putHighKey(k[:], p.ID)
		v := binary.BigEndian.AppendUint64(nil, uint64(s.Next))
		v = binary.BigEndian.AppendUint64(v, uint64(s.LogStart))
		_ = b.Set(k[:], v, nil)
		var lk [highKeyLen]byte
		lk[0] = kindLocal
		binary.BigEndian.PutUint32(lk[1:], p.ID)
		_ = b.Set(lk[:], binary.BigEndian.AppendUint64(nil, uint64(s.Next)), nil)
		seq++
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("batchlog: restore topic %q: %w", name, err)
	}
	if err := l.meta.SaveTopic(t.record(), seq); err != nil {
		return nil, fmt.Errorf("batchlog: restore topic %q: %w", name, err)
	}
	l.partSeq = seq
	l.topics[name] = t
	l.countPartitions(t.Creator, len(t.Partitions))
	return t, nil
}
