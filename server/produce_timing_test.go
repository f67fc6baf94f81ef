package server

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/conn"
	"inlet/metrics"
	"inlet/quota"
)

// replyConn stands in for a socket in benchmarks (a transport.Writer): replies are "written"
// by calling the callback at once. Every other method of gnet.Conn panics (nil embedded
// interface); the produce path must not need them.
type replyConn struct {
	gnet.Conn
	written chan int
}

func (c *replyConn) AsyncWrite(b []byte, cb gnet.AsyncCallback) error {
	n := len(b)
	if cb != nil {
		_ = cb(c, nil)
	}
	c.written <- n
	return nil
}

func (c *replyConn) Wake(gnet.AsyncCallback) error { return nil }

// OutboundBuffered is what gnet's own buffer holds after a write: here nothing (the reply
// code looks at it from the written callback, to count unwritten replies).
func (c *replyConn) OutboundBuffered() int { return 0 }

func (c *replyConn) AsyncWritev(bs [][]byte, cb gnet.AsyncCallback) error {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	if cb != nil {
		_ = cb(c, nil)
	}
	c.written <- n
	return nil
}

func (c *replyConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (c *replyConn) Close() error         { return nil }

// testBatch builds a valid uncompressed magic-2 batch of n records with values of size bytes.
func testBatch(n, size int, producerID int64, seq int32) []byte {
	rb := kmsg.RecordBatch{
		Magic:                2,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       1700000000000,
		MaxTimestamp:         1700000000000,
		ProducerID:           producerID,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(n),
		PartitionLeaderEpoch: -1,
	}
	if producerID >= 0 {
		rb.ProducerEpoch, rb.FirstSequence = 0, seq
	}
	value := make([]byte, size)
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: value}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		rb.Records = r.AppendTo(rb.Records)
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceFrame encodes a Produce v9 request (without its length prefix) with one batch for each
// of partitions partitions of topic.
func produceFrame(topic string, partitions int, batch []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := 0; p < partitions; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = append([]byte(nil), batch...)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	var f []byte
	f = binary.BigEndian.AppendUint16(f, 0) // api key
	f = binary.BigEndian.AppendUint16(f, 9) // version
	f = binary.BigEndian.AppendUint32(f, 1) // correlation id
	f = binary.BigEndian.AppendUint16(f, 5) // client id length
	f = append(f, "bench"...)
	f = append(f, 0) // header tagged fields
	return req.AppendTo(f)
}

// producePath is one produce request's path through everything after the loop's frame copy,
// on a Server wired by hand around a fresh batch log: run sends the frame and waits for its
// reply. layout is a batchlog layout, or "discard"; withMetrics wires the request and commit
// metrics in, as --metrics-listen does, and returns them (nil without); quotas are the
// byte-rate quotas in force (nil: none). The log's tail cache is small (4 MiB), so the
// warm-up of a test fills it and the measured requests are in its steady state, where each
// staging buffer the cache lets go of is reused for the next group.
func producePath(tb testing.TB, layout string, withMetrics bool, quotas quota.Bounds, frame []byte) (run func(), m *metrics.Metrics) {
	return producePathWith(tb, layout, withMetrics, quotas, frame, nil)
}

// producePathWith is producePath with setup run on the server and connection before the
// first request.
func producePathWith(tb testing.TB, layout string, withMetrics bool, quotas quota.Bounds, frame []byte, setup func(*Server, *conn.Conn)) (run func(), m *metrics.Metrics) {
	opts := batchlog.Options{Dir: tb.TempDir(), Layout: layout, FetchCacheBytes: 4 << 20}
	if layout == "discard" {
		opts.Layout, opts.Discard = "", true
	}
	if withMetrics {
		var keys []int16
		for _, k := range SupportedAPIs() {
			keys = append(keys, k.ApiKey)
		}
		m = metrics.New(keys, "test", "")
		opts.Observer = m.Commits
	}
	blog, err := batchlog.Open(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { blog.Close() })
	s := &Server{cfg: Config{AutoCreateTopics: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, quotas: quota.NewManager()}
	s.cfg.setDefaults()
	s.log, s.blog = s.cfg.Logger, blog
	s.quotas.Set(quotas)
	if m != nil {
		s.m = m.Requests
	}
	c, rc := benchConn(tb, s)
	if setup != nil {
		setup(s, c)
	}
	return func() {
		inject(s, c, frame)
		<-rc.written
	}, m
}

// benchConn wires s's connection policy (not started: nothing listens) and returns a
// connection no back-end serves, whose replies go to a replyConn.
func benchConn(tb testing.TB, s *Server) (*conn.Conn, *replyConn) {
	n, err := conn.New(s.connConfig(), (*handler)(s))
	if err != nil {
		tb.Fatal(err)
	}
	s.net = n
	rc := &replyConn{written: make(chan int, 1)}
	return n.NewConn(n.Transport().NewConn(rc, "bench", nil)), rc
}

// inject hands frame to s as c's worker would hand it a request taken off c's queue, counted
// as arrived as the worker's queue counts it (metrics).
func inject(s *Server, c *conn.Conn, frame []byte) {
	r := getRequest()
	r.t, r.c, r.s = c.T().Inject(frame), c, s
	if m := s.m; m != nil {
		r.start = time.Now()
		m.Received(4 + len(r.frame()))
	}
	s.handle(r)
}

// anonymousUser is the user quotas count a client without a principal under.
const anonymousUser = conn.AnonymousUser

// BenchmarkProducePath measures one produce request (16 partitions x 16 KiB uncompressed
// batches of 100-byte records) through everything after the loop's frame copy: header parse,
// decode, CRC validation, the group commit (the idempotence check, offset assignment, the Pebble
// batch, its synced apply), and the reply's encoding. Requests run one at a time, so each is
// its own group and each pays a whole fsync; the figure of interest is allocs/op, which
// includes everything the committer and completer goroutines allocate. "segments-metrics" is
// "segments" with the Prometheus metrics on (--metrics-listen).
func BenchmarkProducePath(b *testing.B) {
	frame := produceFrame("bench", 16, testBatch(150, 100, -1, 0))
	for _, mode := range []struct {
		name, layout string
		metrics      bool
	}{{batchlog.LayoutSegments, batchlog.LayoutSegments, false}, {batchlog.LayoutPebble, batchlog.LayoutPebble, false}, {"discard", "discard", false},
		{"segments-metrics", batchlog.LayoutSegments, true}} {
		b.Run(mode.name, func(b *testing.B) {
			run, _ := producePath(b, mode.layout, mode.metrics, nil, frame)
			for i := 0; i < 100; i++ { // warm pools and create the topic
				run()
			}
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run()
			}
		})
	}
}

// TestProducePathQuotaAllocatesNothing: with a producer_byte_rate in force for the client's
// user, a produce request through decode, commit and reply still allocates nothing (the
// discard store, so that only the request path is counted; BenchmarkProducePath measures the
// others).
func TestProducePathQuotaAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items at random: allocation counts mean nothing under it")
	}
	frame := produceFrame("bench", 16, testBatch(150, 100, -1, 0))
	run, _ := producePath(t, "discard", false, quota.Bounds{anonymousUser: {quota.ProducerByteRate: 1 << 40}}, frame)
	for i := 0; i < 100; i++ { // warm pools and create the topic
		run()
	}
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Fatalf("%v allocations per produce request with a quota in force", n)
	}
}
