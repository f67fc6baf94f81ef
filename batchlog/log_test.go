package batchlog

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"inlet/wire"
)

// fakeBatch builds a record-batch-shaped value: a 61-byte header with lastOffsetDelta set, and
// a payload byte so batches are distinguishable. The committer and reader look at nothing else.
// Its length and CRC fields are right, so segment replay accepts it.
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

func submitWait(t testing.TB, l *Log, appends ...Append) *Request {
	t.Helper()
	done := make(chan struct{})
	r := &Request{Appends: appends, Done: func(*Request) { close(done) }}
	l.Submit(r)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("request not answered")
	}
	return r
}

func idempotent(p *Partition, pid int64, epoch int16, seq, n int32, tag byte) Append {
	b := fakeBatch(n, tag)
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	return Append{Partition: p, Batch: sealBatch(b, n), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, NumRecords: n}
}

func plain(p *Partition, n int32, tag byte) Append {
	return Append{Partition: p, Batch: fakeBatch(n, tag), ProducerID: -1, NumRecords: n}
}

func openTemp(t *testing.T, dir string) *Log {
	t.Helper()
	l, err := Open(Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAppendAssignsOffsetsAndReadsBack(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	topic, err := l.CreateTopic("t", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := topic.Partitions[0], topic.Partitions[1]
	r := submitWait(t, l, plain(p0, 3, 'a'), plain(p1, 2, 'b'), plain(p0, 4, 'c'))
	want := []int64{0, 0, 3}
	for i, a := range r.Appends {
		if a.Err != wire.ErrNone || a.BaseOffset != want[i] {
			t.Fatalf("append %d: err %d base %d, want base %d", i, a.Err, a.BaseOffset, want[i])
		}
	}
	if p0.HighWatermark() != 7 || p1.HighWatermark() != 2 {
		t.Fatalf("high watermarks %d %d", p0.HighWatermark(), p1.HighWatermark())
	}
	// Offset 5 lies inside the second batch of p0: reading starts with that whole batch.
	got, err := l.ReadBatches(p0, 5, p0.HighWatermark(), 1<<20, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 62 || got[61] != 'c' || binary.BigEndian.Uint64(got) != 3 {
		t.Fatalf("read %x", got)
	}
	got, _ = l.ReadBatches(p0, 0, p0.HighWatermark(), 1<<20, true, nil)
	if len(got) != 124 || got[61] != 'a' {
		t.Fatalf("read from 0: %d bytes", len(got))
	}
	// maxBytes smaller than one batch: includeFirst decides.
	if got, _ := l.ReadBatches(p0, 0, 7, 10, true, nil); len(got) != 62 {
		t.Fatalf("includeFirst read %d bytes", len(got))
	}
	if got, _ := l.ReadBatches(p0, 0, 7, 10, false, nil); len(got) != 0 {
		t.Fatalf("read without includeFirst returned %d bytes", len(got))
	}
	// The limit (a high watermark or LSO) bounds the read.
	if got, _ := l.ReadBatches(p0, 0, 3, 1<<20, true, nil); len(got) != 62 {
		t.Fatalf("limit not honoured: %d bytes", len(got))
	}
}

func TestDuplicateInSameGroupGetsOriginalOffset(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	r := submitWait(t, l,
		idempotent(p, 7, 0, 0, 5, 'a'),
		idempotent(p, 7, 0, 0, 5, 'a'), // the retry lands in the same group as its original
		idempotent(p, 7, 0, 5, 5, 'b'),
	)
	if r.Appends[1].Err != wire.ErrNone || r.Appends[1].BaseOffset != 0 || r.Appends[2].BaseOffset != 5 {
		t.Fatalf("appends %+v", r.Appends)
	}
	if p.HighWatermark() != 10 {
		t.Fatalf("duplicate was stored: hw %d", p.HighWatermark())
	}
}

func TestRestartRecoversOffsetsProducerStateAndTopics(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	topic, _ := l.CreateTopic("orders", 3, map[string]string{"cleanup.policy": "delete"})
	p := topic.Partitions[2]
	pid, _ := l.Meta().AllocateProducerID()
	submitWait(t, l, idempotent(p, pid, 0, 0, 4, 'a'))
	submitWait(t, l, idempotent(p, pid, 0, 4, 4, 'b'))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openTemp(t, dir)
	defer l.Close()
	topic, ok := l.Topic("orders")
	if !ok || len(topic.Partitions) != 3 || topic.Configs["cleanup.policy"] != "delete" {
		t.Fatalf("topic not recovered: %+v", topic)
	}
	p = topic.Partitions[2]
	if p.HighWatermark() != 8 {
		t.Fatalf("hw after restart %d", p.HighWatermark())
	}
	// A retry of the first batch after the restart is answered with its original offset.
	r := submitWait(t, l, idempotent(p, pid, 0, 0, 4, 'a'))
	if r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 0 || p.HighWatermark() != 8 {
		t.Fatalf("replay after restart: %+v hw %d", r.Appends[0], p.HighWatermark())
	}
	r = submitWait(t, l, idempotent(p, pid, 0, 9, 1, 'x'))
	if r.Appends[0].Err != 45 {
		t.Fatalf("gap after restart: err %d", r.Appends[0].Err)
	}
	next, _ := l.Meta().AllocateProducerID()
	if next <= pid {
		t.Fatalf("producer id %d reused after restart (had %d)", next, pid)
	}
	if got, _ := l.ReadBatches(p, 0, p.HighWatermark(), 1<<20, true, nil); len(got) != 124 {
		t.Fatalf("read after restart: %d bytes", len(got))
	}
	if l.Meta().ClusterID() == "" || len(l.Meta().ClusterID()) != 22 {
		t.Fatalf("cluster id %q", l.Meta().ClusterID())
	}
}

// gatedStore is a store whose syncs are held until the test releases them, to check what the
// committer publishes and answers before a group is durable.
type gatedStore struct {
	mu      sync.Mutex
	applied int
	gates   []chan struct{}
}

type gatedGroup struct {
	s    *gatedStore
	gate chan struct{}
}

func (s *gatedStore) NewGroup(int) Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &gatedGroup{s: s, gate: make(chan struct{})}
	s.gates = append(s.gates, g.gate)
	return g
}
func (s *gatedStore) gate(i int) chan struct{} {
	for {
		s.mu.Lock()
		if i < len(s.gates) {
			g := s.gates[i]
			s.mu.Unlock()
			return g
		}
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}
func (s *gatedStore) PlanRead(uint32, int64, int64, int, bool, *ReadPlan) error { return nil }
func (s *gatedStore) Close() error                                              { return nil }
func (s *gatedStore) DropUnwritten()                                            {}
func (g *gatedGroup) SetData(uint32, int64, []byte, bool)                       {}
func (g *gatedGroup) Set(_, _ []byte)                                           {}
func (g *gatedGroup) Del([]byte)                                                {}
func (g *gatedGroup) Apply() error {
	g.s.mu.Lock()
	g.s.applied++
	g.s.mu.Unlock()
	return nil
}
func (g *gatedGroup) Wait() error                     { <-g.gate; return nil }
func (g *gatedGroup) Release()                        {}
func (g *gatedGroup) CarriesMetadata()                {}
func (s *gatedStore) MetadataInterval() time.Duration { return 0 }

func TestNothingIsAnsweredOrPublishedBeforeItsGroupIsDurable(t *testing.T) {
	s := &gatedStore{}
	l := newWithStore(s, Options{})
	defer l.Close()
	p := &Partition{ID: 1}
	answered := make(chan int, 2)
	r1 := &Request{Appends: []Append{idempotent(p, 1, 0, 0, 2, 'a')}, Done: func(*Request) { answered <- 1 }}
	l.Submit(r1)
	g1 := s.gate(0)
	// While group 1 syncs, a retry of its batch and a new batch arrive: they form group 2,
	// which is applied without waiting for group 1's sync.
	r2 := &Request{Appends: []Append{idempotent(p, 1, 0, 0, 2, 'a'), idempotent(p, 1, 0, 2, 3, 'b')}, Done: func(*Request) { answered <- 2 }}
	l.Submit(r2)
	g2 := s.gate(1)
	close(g2) // group 2 is durable first ...
	select {
	case n := <-answered:
		t.Fatalf("request %d answered before group 1 was durable", n)
	case <-time.After(50 * time.Millisecond):
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d published before any sync completed", hw)
	}
	close(g1) // ... but answers and publication follow apply order.
	if a, b := <-answered, <-answered; a != 1 || b != 2 {
		t.Fatalf("answer order %d %d", a, b)
	}
	if p.HighWatermark() != 5 {
		t.Fatalf("hw %d", p.HighWatermark())
	}
	if r2.Appends[0].BaseOffset != 0 || r2.Appends[1].BaseOffset != 2 {
		t.Fatalf("group 2 offsets %+v", r2.Appends)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { close(s.gate(2)) }()
	if err := l.waitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFailedSyncAnswersStorageErrorAndStaysFailed(t *testing.T) {
	var fatal error
	s := &failingStore{}
	l := newWithStore(s, Options{OnFatal: func(err error) { fatal = err }})
	defer l.Close()
	p := &Partition{ID: 1}
	r := submitWait(t, l, plain(p, 1, 'a'))
	if r.Appends[0].Err != wire.ErrKafkaStorageError || fatal == nil || p.HighWatermark() != 0 {
		t.Fatalf("err %d fatal %v hw %d", r.Appends[0].Err, fatal, p.HighWatermark())
	}
	r = submitWait(t, l, plain(p, 1, 'b'))
	if r.Appends[0].Err != wire.ErrKafkaStorageError {
		t.Fatalf("log accepted a write after a failed sync")
	}
}

type failingStore struct{ discardStore }
type failingGroup struct{ discardGroup }

func (failingStore) NewGroup(int) Group { return failingGroup{} }
func (failingGroup) Wait() error        { return errSync }

var errSync = &syncError{}

type syncError struct{}

func (*syncError) Error() string { return "fdatasync: input/output error" }
