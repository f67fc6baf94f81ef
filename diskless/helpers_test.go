package diskless

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless/format"
	"inlet/objstore"
	"inlet/tier"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// batch builds a record-batch-shaped value (the committer and the codec read only the
// header): n records of producer pid (-1: none) from sequence seq, a tag byte for telling
// batches apart, and the length and CRC fields right.
func batch(pid int64, seq, n int32, tag byte) []byte {
	b := make([]byte, 62)
	b[61] = tag
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// node is a log with a committer on a bucket, in a data directory that outlives it.
type node struct {
	t   *testing.T
	dir string
	l   *batchlog.Log
	c   *Committer
}

func openNode(t *testing.T, dir string, bucket objstore.Bucket, cfg Config, restore bool) *node {
	t.Helper()
	cfg.Bucket, cfg.Logger = bucket, quiet
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 20 * time.Millisecond
	}
	c := New(cfg)
	l, err := batchlog.Open(batchlog.Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Diskless: c, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if restore {
		if _, _, err := tier.Restore(ctx, l, l.Meta(), bucket, quiet); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Recover(ctx, l); err != nil {
		t.Fatal(err)
	}
	return &node{t: t, dir: dir, l: l, c: c}
}

func (n *node) close() {
	if err := n.l.Close(); err != nil {
		n.t.Fatal(err)
	}
	n.c.Close()
}

// topic creates a topic (diskless or not) and describes it, as CreateTopics does.
func (n *node) topic(name string, diskless bool) *batchlog.Topic {
	n.t.Helper()
	var configs map[string]string
	if diskless {
		configs = map[string]string{"diskless.enable": "true"}
	}
	tp, err := n.l.CreateTopicBy(name, 2, configs, "")
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.c.Describe(context.Background(), tp); err != nil {
		n.t.Fatal(err)
	}
	return tp
}

// produce is one produce request in flight, answered through Completion as the server's are.
type produce struct {
	r    batchlog.Request
	done chan struct{}
	at   time.Time
}

func (p *produce) Completed(*batchlog.Request) {
	p.at = time.Now()
	close(p.done)
}

// send submits one batch per append, each to its partition.
func (n *node) send(appends ...batchlog.Append) *produce {
	p := &produce{done: make(chan struct{})}
	p.r.Appends = appends
	p.r.Completion = p
	n.l.Submit(&p.r)
	return p
}

func appendOf(p *batchlog.Partition, pid int64, seq, records int32, tag byte) batchlog.Append {
	return batchlog.Append{Partition: p, Batch: batch(pid, seq, records, tag), ProducerID: pid, BaseSequence: seq, NumRecords: records}
}

// wait waits for pr's answer and returns its first append's result.
func (pr *produce) wait(t *testing.T, within time.Duration) *batchlog.Append {
	t.Helper()
	select {
	case <-pr.done:
	case <-time.After(within):
		t.Fatalf("produce not answered within %v", within)
	}
	return &pr.r.Appends[0]
}

func answered(pr *produce) bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// objects decodes every commit object in the bucket, in order.
func objects(t *testing.T, m *objstore.Memory) (out [][]Entry) {
	t.Helper()
	for _, k := range m.Keys() {
		if _, ok := format.ParseLogKey(k); !ok {
			continue
		}
		b, _ := m.Object(k)
		_, es, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out = append(out, es)
	}
	return out
}

var errDown = errors.New("injected: bucket down")

func tagOf(b []byte) byte { return b[61] }
