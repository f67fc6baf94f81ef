package batchlog

// The start-up cross-check: the metadata in Pebble against the segment files. Replay cuts a
// torn tail and stops at damage inside the segments (segments/segment.go), but it cannot see data that
// is missing whole: a segments/ directory lost with every file in it (its name never synced
// into the data directory), or a segment file gone from it. The node would then serve the
// catalog's partitions as empty and take new batches at offsets the producers were already
// acknowledged for. So start-up refuses, naming what is missing:
//
//   - no segments/ directory, while Pebble holds a topic, a high watermark, a checkpoint, an
//     index entry or a producer window (catalogNamesData, before the directory is made);
//   - after replay, a partition whose high watermark is past its local log start (what the
//     node itself holds; below it a tiered topic's batches are remote) but whose first or
//     last index entry names a segment that is not there or is shorter than the entry, or
//     whose producer windows name offsets at or past the high watermark the segments bear
//     out (checkSegmentsHoldMetadata). Replay has run by then: it may have indexed batches
//     it found (data that is there); nothing is accepted or served.
//
// The first and last entries bound the segments a partition's batches lie in (each partition's
// batches lie in non-decreasing segments, but for copies moved forward, which replay indexes
// where they now lie), and reclaim removes a segment only once nothing names it: two seeks a
// partition instead of a scan of the whole index.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"inlet/batchlog/segments"
	"inlet/meta"
)

// catalogNamesData returns what in Pebble names record data (a topic, a high watermark, the
// checkpoint, an index entry or a producer window), or "" if nothing does: a fresh node.
func catalogNamesData(m *meta.Store) (string, error) {
	if name, ok, err := m.FirstTopic(); err != nil || ok {
		return fmt.Sprintf("topic %q", name), err
	}
	db := m.DB()
	for _, kind := range []struct {
		prefix []byte
		what   string
	}{
		{[]byte{kindHigh}, "high watermark of partition"},
		{metaCheckpoint, "the segment checkpoint"},
		{[]byte{kindData}, "index entry"},
		{[]byte{kindProducer}, "producer window"},
	} {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: kind.prefix, UpperBound: prefixEnd(kind.prefix)})
		if err != nil {
			return "", err
		}
		found := it.First()
		what := kind.what
		if found {
			switch kind.prefix[0] {
			case kindHigh, kindData:
				if len(it.Key()) >= 5 {
					what = fmt.Sprintf("%s %d", kind.what, binary.BigEndian.Uint32(it.Key()[1:]))
				}
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return "", err
		}
		if found {
			return what, nil
		}
	}
	return "", nil
}

// checkSegmentsHoldMetadata stops start-up where the metadata names record data that no
// segment holds (the file comment says what is checked). It runs after replay, which has
// indexed every batch it found past the checkpoint.
func (l *Log) checkSegmentsHoldMetadata(ss *segments.Store, byID map[uint32]*Partition) error {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kindData}, UpperBound: []byte{kindData + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	missing := func(p *Partition, format string, args ...any) error {
		return fmt.Errorf("batchlog: partition %s-%d (id %d) holds offsets %d to %d by the metadata, but %s: segment data is missing; start-up stopped",
			p.Topic, p.Index, p.ID, p.localStart.Load(), p.next, fmt.Sprintf(format, args...))
	}
	held := func(p *Partition, which string, v []byte) error {
		loc, err := segments.ParseLoc(v)
		if err != nil {
			return missing(p, "its %s index entry is unreadable (%v)", which, err)
		}
		if why := ss.Missing(loc); why != "" {
			return missing(p, "its %s batch %s", which, why)
		}
		return nil
	}
	for _, p := range byID {
		if p.next <= p.localStart.Load() {
			continue // nothing retained on this node
		}
		lo, hi := dataKey(p.ID, 0), dataKey(p.ID+1, 0)
		if !it.SeekGE(lo) || string(it.Key()) >= string(hi) {
			if err := it.Error(); err != nil {
				return err
			}
			return missing(p, "no batch of it is indexed")
		}
		if err := held(p, "first", it.Value()); err != nil {
			return err
		}
		if !it.SeekLT(hi) {
			return errors.Join(it.Error(), fmt.Errorf("batchlog: index of partition %d changed during start-up", p.ID))
		}
		if err := held(p, "last", it.Value()); err != nil {
			return err
		}
	}
	for key, st := range l.producers {
		p := byID[key.partition]
		if p == nil {
			continue // a deleted topic's
		}
		if last, ok := st.Last(); ok && last.BaseOffset+int64(last.LastOffsetDelta) >= p.next {
			return missing(p, "producer %d's window names offset %d, which no segment holds",
				key.id, last.BaseOffset+int64(last.LastOffsetDelta))
		}
	}
	return it.Error()
}
