package upkeep

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"inlet/batchlog"
)

// The batchlog test helpers the passes' tests use (batchlog's log_test.go, segment_test.go,
// reclaim_test.go hold the originals).

// passes returns l's passes, run by the test (none in the background).
func passes(l *batchlog.Log) *Upkeep { return Start(l, Config{RetentionCheckInterval: -1}) }

// fakeBatch builds a record-batch-shaped value: a 61-byte header with lastOffsetDelta set, and
// a payload byte so batches are distinguishable. Its length and CRC fields are right, so
// segment replay accepts it.
func fakeBatch(records int32, tag byte) []byte {
	b := make([]byte, 61+1)
	b[61] = tag
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	return sealBatch(b, records)
}

func sealBatch(b []byte, records int32) []byte {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(records-1))
	binary.BigEndian.PutUint32(b[57:], uint32(records))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func submitWait(t testing.TB, l *batchlog.Log, appends ...batchlog.Append) *batchlog.Request {
	t.Helper()
	done := make(chan struct{})
	r := &batchlog.Request{Appends: appends, Done: func(*batchlog.Request) { close(done) }}
	l.Submit(r)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("request not answered")
	}
	return r
}

func plain(p *batchlog.Partition, n int32, tag byte) batchlog.Append {
	return batchlog.Append{Partition: p, Batch: fakeBatch(n, tag), ProducerID: -1, NumRecords: n}
}

func openTemp(t *testing.T, dir string) *batchlog.Log {
	t.Helper()
	l, err := batchlog.Open(batchlog.Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustTopic(t *testing.T, l *batchlog.Log, name string) *batchlog.Topic {
	t.Helper()
	topic, ok := l.Topic(name)
	if !ok {
		t.Fatalf("topic %q missing", name)
	}
	return topic
}

// stampedBatch is a plain batch of records whose timestamps are ts (unix ms), padded to size
// bytes, tagged with tag.
func stampedBatch(p *batchlog.Partition, records int32, ts int64, size int, tag byte) batchlog.Append {
	b := make([]byte, max(size, 62))
	b[61] = tag
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts))
	return batchlog.Append{Partition: p, Batch: sealBatch(b, records), ProducerID: -1, NumRecords: records}
}

// verifyFunc is a batchlog.TxnVerifier answering with a function.
type verifyFunc func(transactionalID string, producerID int64, epoch int16, topic string, partition int32) bool

func (f verifyFunc) Verify(transactionalID string, producerID int64, epoch int16, topic string, partition int32) bool {
	return f(transactionalID, producerID, epoch, topic, partition)
}
