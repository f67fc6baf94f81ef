package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/batchlog/upkeep"
	"inlet/meta"
	"inlet/metrics"
	"inlet/server"
	"inlet/tier"
)

// broker is an Inlet node running in the test process on a loopback port.
type broker struct {
	t    testing.TB
	dir  string
	cfg  server.Config
	blog *batchlog.Log
	// upkeep runs the log's retention, compaction, reclaim and producer expiry, as the node does.
	upkeep *upkeep.Upkeep
	srv    *server.Server
	addr   string
	// m is the node's metrics: every broker runs with them on (as --metrics-listen does), so
	// every test, the protocol fuzzer under the race detector included, drives their hooks,
	// and stop scrapes them once.
	m *metrics.Metrics
	// remote, when set before start, opens a remote tier with it (tier_test.go); restore
	// rebuilds the tiered topics from its bucket first. tier is the open tier.
	remote  *tier.Config
	restore bool
	tier    *tier.Tier
	// logMod, when set before start, adjusts the batch log's options (state_bounds_test.go).
	logMod func(*batchlog.Options)
}

// startBroker opens a batch log in a fresh temporary directory and serves it on a random
// loopback port. mod, when given, adjusts the server config before start.
func startBroker(t testing.TB, mod func(*server.Config)) *broker {
	t.Helper()
	cfg := testServerConfig()
	if mod != nil {
		mod(&cfg)
	}
	b := &broker{t: t, dir: t.TempDir(), cfg: cfg}
	b.start()
	t.Cleanup(b.stop)
	return b
}

// testServerConfig is the server config of a test broker.
func testServerConfig() server.Config {
	return server.Config{
		Listen:            "127.0.0.1:0",
		AutoCreateTopics:  true,
		DefaultPartitions: 4,
		Workers:           2,
		Logger:            testLogger(),
		// Kafka's 3 s wait for more members of a new group only slows tests down.
		GroupInitialRebalanceDelay: -1,
	}
}

func (b *broker) start() {
	b.t.Helper()
	if err := b.tryStart(); err != nil {
		b.t.Fatal(err)
	}
}

func (b *broker) tryStart() error {
	var keys []int16
	for _, k := range server.SupportedAPIs() {
		keys = append(keys, k.ApiKey)
	}
	m := metrics.New(keys, "test", "")
	cat, err := meta.Open(meta.Options{Dir: b.dir, Logger: testLogger()})
	if err != nil {
		return fmt.Errorf("open catalog: %w", err)
	}
	cfg := b.cfg
	cfg.Metrics = m.Requests
	srv, err := server.New(cfg, cat)
	if err != nil {
		cat.Close()
		return fmt.Errorf("start server: %w", err)
	}
	logOpts := batchlog.Options{Dir: b.dir, Logger: testLogger(), Observer: m.Commits, Meta: cat, Txns: srv.Txns()}
	if b.logMod != nil {
		b.logMod(&logOpts)
	}
	blog, err := batchlog.Open(logOpts)
	if err != nil {
		srv.Close()
		return fmt.Errorf("open batch log: %w", err)
	}
	upkeepCfg := cfg.Upkeep
	upkeepCfg.Logger = testLogger()
	tr, err := b.openTier(blog, cat)
	if err != nil {
		srv.Close()
		blog.Close()
		return err
	}
	var remote server.RemoteTier
	if tr != nil {
		upkeepCfg.Tier, remote = tr, tr
		tr.Start()
	}
	passes := upkeep.Start(blog, upkeepCfg)
	if err := srv.Start(blog, remote); err != nil {
		passes.Close()
		if tr != nil {
			tr.Close()
		}
		blog.Close()
		return fmt.Errorf("start server: %w", err)
	}
	m.Watch(blog, srv)
	if tr != nil {
		m.WatchRemote(tr)
	}
	b.blog, b.upkeep, b.srv, b.addr, b.m, b.tier = blog, passes, srv, srv.Addr(), m, tr
	return nil
}

// testLogger discards the broker's log unless INLET_E2E_LOG is set (then it goes to stderr at
// debug level).
func testLogger() *slog.Logger {
	if os.Getenv("INLET_E2E_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// failureLog is a logger whose lines (info and above) t prints if it fails, after its brokers
// have stopped (INLET_E2E_LOG prints every line at once instead): for a test whose failure
// the node's own reason explains, such as a connection it closed.
func failureLog(t testing.TB) *slog.Logger {
	if os.Getenv("INLET_E2E_LOG") != "" {
		return testLogger()
	}
	w := &lockedBuffer{}
	t.Cleanup(func() { // registered before the brokers' stops, so it runs after them
		if t.Failed() {
			t.Logf("the node's log:\n%s", w.String())
		}
	})
	return slog.New(slog.NewTextHandler(w, nil))
}

// lockedBuffer is a bytes.Buffer that goroutines may write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// stop drains the server and closes the log; it is idempotent.
func (b *broker) stop() {
	if b.srv == nil {
		return
	}
	if _, err := b.m.Registry.Gather(); err != nil {
		b.t.Errorf("metrics: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		b.t.Errorf("shutdown: %v", err)
	}
	b.upkeep.Close()
	if b.tier != nil {
		b.tier.Close()
	}
	if err := b.blog.Close(); err != nil {
		b.t.Errorf("close log: %v", err)
	}
	b.srv, b.blog, b.upkeep, b.tier = nil, nil, nil, nil
}

// openTier opens the remote tier b.remote asks for (nil: none), after the restore b.restore
// asks for.
func (b *broker) openTier(blog *batchlog.Log, cat *meta.Store) (*tier.Tier, error) {
	if b.remote == nil {
		return nil, nil
	}
	cfg := *b.remote
	cfg.Logger = testLogger()
	if b.restore {
		b.restore = false // once: a restart after it opens what it restored
		if _, _, err := tier.Restore(context.Background(), blog, cat, cfg.Bucket, cfg.Logger); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	tr, err := tier.Open(blog, cat, cfg)
	if err != nil {
		return nil, fmt.Errorf("open tier: %w", err)
	}
	return tr, nil
}

// abandon forgets a wedged node without shutting it down (Shutdown would wait for its event
// loops forever), so that a test can fail instead of hanging in cleanup.
func (b *broker) abandon() { b.srv, b.blog, b.upkeep, b.tier = nil, nil, nil, nil }

// restart stops the node and starts it again on the same data directory and, so that
// connected clients find it again, on the same address.
func (b *broker) restart() {
	b.t.Helper()
	addr := b.addr
	b.stop()
	b.cfg.Listen = addr
	var err error
	for i := 0; i < 50; i++ {
		// Shutdown closed the old listener; retry briefly in case the port lingers.
		if err = b.tryStart(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("restart on %s: %v", addr, err)
}

func (b *broker) createTopic(name string, partitions int) {
	b.t.Helper()
	if _, err := b.blog.CreateTopic(name, partitions, nil); err != nil {
		b.t.Fatalf("create topic %s: %v", name, err)
	}
}

func (b *broker) highWatermark(topic string, partition int32) int64 {
	b.t.Helper()
	tp, ok := b.blog.Topic(topic)
	if !ok {
		b.t.Fatalf("topic %s does not exist", topic)
	}
	return tp.Partitions[partition].HighWatermark()
}

// waitHighWatermark waits (up to 10s) until the partition's high watermark is want, and
// fails if it passes want or never gets there.
func (b *broker) waitHighWatermark(topic string, partition int32, want int64) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hw := b.highWatermark(topic, partition)
		if hw == want {
			return
		}
		if hw > want || time.Now().After(deadline) {
			b.t.Fatalf("%s/%d high watermark %d, want %d", topic, partition, hw, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ---- records produced and consumed by the client tests ----

type header struct{ key, value string }

// rec is one record as a test produces it and expects it back.
type rec struct {
	partition int32
	offset    int64 // filled in from the produce result
	key       []byte
	value     []byte
	headers   []header
}

// makeRecords builds n distinct records spread round robin over partitions. Every fifth key
// is null and every seventh value is empty, so nullness and emptiness both travel.
func makeRecords(n int, partitions int32, tag string) []*rec {
	out := make([]*rec, n)
	for i := range out {
		r := &rec{partition: int32(i) % partitions, offset: -1}
		if i%5 != 0 {
			r.key = []byte(fmt.Sprintf("%s-key-%d", tag, i))
		}
		if i%7 != 0 {
			r.value = bytes.Repeat([]byte(fmt.Sprintf("%s-value-%d|", tag, i)), 1+i%13)
		} else {
			r.value = []byte{}
		}
		for h := 0; h < i%3; h++ {
			r.headers = append(r.headers, header{fmt.Sprintf("h%d", h), fmt.Sprintf("%s-hv-%d-%d", tag, i, h)})
		}
		out[i] = r
	}
	return out
}

// got is one record as a consumer returned it.
type got struct {
	partition int32
	offset    int64
	key       []byte
	value     []byte
	headers   []header
}

// checkRecords compares what was consumed with what was produced: per partition, offsets
// dense from 0 and every record's key, value and headers byte for byte. When the producer
// reported offsets (want[i].offset >= 0) they must match too.
func checkRecords(t testing.TB, want []*rec, consumed []got) {
	t.Helper()
	wantBy := map[int32][]*rec{}
	for _, w := range want {
		wantBy[w.partition] = append(wantBy[w.partition], w)
	}
	gotBy := map[int32][]got{}
	for _, g := range consumed {
		gotBy[g.partition] = append(gotBy[g.partition], g)
	}
	for p, ws := range wantBy {
		gs := gotBy[p]
		sort.Slice(gs, func(i, j int) bool { return gs[i].offset < gs[j].offset })
		if len(gs) != len(ws) {
			t.Errorf("partition %d: consumed %d records, produced %d", p, len(gs), len(ws))
			continue
		}
		// Produce order within a partition is offset order (one producer, ordered acks).
		sort.SliceStable(ws, func(i, j int) bool {
			if ws[i].offset < 0 || ws[j].offset < 0 {
				return false
			}
			return ws[i].offset < ws[j].offset
		})
		for i, g := range gs {
			w := ws[i]
			if g.offset != int64(i) {
				t.Errorf("partition %d: record %d has offset %d, want dense offsets from 0", p, i, g.offset)
				return
			}
			if w.offset >= 0 && w.offset != g.offset {
				t.Errorf("partition %d: producer was told offset %d, consumer read %d", p, w.offset, g.offset)
			}
			if !bytes.Equal(g.key, w.key) || (g.key == nil) != (w.key == nil) {
				t.Errorf("partition %d offset %d: key %q, want %q", p, g.offset, g.key, w.key)
			}
			if !bytes.Equal(g.value, w.value) {
				t.Errorf("partition %d offset %d: value %q, want %q", p, g.offset, trunc(g.value), trunc(w.value))
			}
			if !sameHeaders(g.headers, w.headers) {
				t.Errorf("partition %d offset %d: headers %v, want %v", p, g.offset, g.headers, w.headers)
			}
		}
	}
	for p, gs := range gotBy {
		if _, ok := wantBy[p]; !ok {
			t.Errorf("partition %d: consumed %d records nobody produced", p, len(gs))
		}
	}
}

func sameHeaders(a, b []header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// ---- franz-go ----

func toKgo(topic string, r *rec) *kgo.Record {
	kr := &kgo.Record{Topic: topic, Partition: r.partition, Key: r.key, Value: r.value}
	for _, h := range r.headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.key, Value: []byte(h.value)})
	}
	return kr
}

func fromKgo(r *kgo.Record) got {
	g := got{partition: r.Partition, offset: r.Offset, key: r.Key, value: r.Value}
	for _, h := range r.Headers {
		g.headers = append(g.headers, header{h.Key, string(h.Value)})
	}
	return g
}

// kgoProduce produces recs synchronously and records the offsets the broker answered.
func kgoProduce(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, recs []*rec) {
	t.Helper()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = toKgo(topic, r)
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for i, kr := range krs {
		if kr.Partition != recs[i].partition {
			t.Fatalf("record %d went to partition %d, want %d", i, kr.Partition, recs[i].partition)
		}
		recs[i].offset = kr.Offset
	}
}

// kgoConsume reads partitions 0..partitions-1 of topic from the start until n records have
// arrived (or ctx ends).
func kgoConsume(ctx context.Context, t testing.TB, addr, topic string, partitions int32, n int, opts ...kgo.Opt) []got {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	var out []got
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch %s/%d: %v", topic, p, err)
		})
		if t.Failed() {
			t.FailNow()
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	}
	return out
}

// ---- raw protocol ----

// rawConn sends kmsg-encoded requests over one TCP connection and reads response frames.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("inlet-e2e"))}
}

// frame encodes req (at its set version) with the next correlation id.
func (rc *rawConn) frame(req kmsg.Request) ([]byte, int32) {
	rc.corr++
	return rc.f.AppendRequest(nil, req, rc.corr), rc.corr
}

// send writes req and returns its correlation id.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	b, corr := rc.frame(req)
	rc.write(b)
	return corr
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame and returns its correlation id and the bytes after it.
func (rc *rawConn) readFrame(timeout time.Duration) (int32, []byte, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("response frame of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rc.c, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// decode parses a response body for req (header tags skipped when the response header is v1).
func decodeResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	if req.IsFlexible() && req.Key() != 18 {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		_, k = binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// recv reads the next frame and decodes it as the response to req sent with corr.
func (rc *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	rc.t.Helper()
	gotCorr, body, err := rc.readFrame(10 * time.Second)
	if err != nil {
		rc.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if gotCorr != corr {
		rc.t.Fatalf("%s response has correlation id %d, want %d", kmsg.NameForKey(req.Key()), gotCorr, corr)
	}
	resp, err := decodeResponse(req, body)
	if err != nil {
		rc.t.Fatal(err)
	}
	return resp
}

func (rc *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	return rc.recv(req, rc.send(req))
}

// expectClosed asserts that the server closes the connection (EOF or reset) without
// answering.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	corr, _, err := rc.readFrame(5 * time.Second)
	if err == nil {
		rc.t.Fatalf("server answered (correlation id %d); want the connection closed", corr)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		rc.t.Fatalf("connection still open after 5s; want it closed")
	}
}

// alive asserts that the connection still answers an ApiVersions request.
func (rc *rawConn) alive() {
	rc.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "inlet-e2e", "1"
	resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		rc.t.Fatalf("ApiVersions on the same connection: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// produceReq is a Produce request for one partition carrying batch.
func produceReq(version, acks int16, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceOne sends one batch and returns the partition's result.
func (rc *rawConn) produceOne(version int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	rc.t.Helper()
	resp := rc.roundTrip(produceReq(version, -1, topic, partition, batch)).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("produce response has %d topics; want one topic with one partition", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

func fetchReq(version int16, topic string, partition int32, offset int64, maxWait, minBytes, maxBytes, partMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWait
	req.MinBytes = minBytes
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = partMax
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func listOffsetsReq(version int16, topic string, partition int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rp.MaxNumOffsets = 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ---- record batches built by hand ----

type rawRecord struct {
	tsDelta int64
	key     []byte // nil: null key
	value   []byte
	headers []header
}

// batchSpec describes a magic-2 record batch. encode fills in the derived fields (length,
// last offset delta, record count, CRC) from the records unless a test overrides them after.
type batchSpec struct {
	firstTS       int64
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	attributes    int16
	records       []rawRecord
}

// plainBatch is a non-idempotent batch of n small records with timestamps ts, ts+1, ...
func plainBatch(n int, ts int64, tag string) batchSpec {
	s := batchSpec{firstTS: ts, producerID: -1, producerEpoch: -1, baseSequence: -1}
	for i := 0; i < n; i++ {
		s.records = append(s.records, rawRecord{tsDelta: int64(i), key: []byte(fmt.Sprintf("k%d", i)), value: []byte(fmt.Sprintf("%s-%d", tag, i))})
	}
	return s
}

func (s batchSpec) idempotent(pid int64, epoch int16, seq int32) batchSpec {
	s.producerID, s.producerEpoch, s.baseSequence = pid, epoch, seq
	return s
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Byte offsets in a v2 record batch (DefaultRecordBatch).
const (
	offLength          = 8
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offNumRecords      = 57
	batchHeaderLen     = 61
)

func (s batchSpec) encode() []byte {
	var recs []byte
	maxTS := s.firstTS
	for i, r := range s.records {
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, r.tsDelta)
		body = binary.AppendVarint(body, int64(i))
		if r.key == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.key)))
			body = append(body, r.key...)
		}
		body = binary.AppendVarint(body, int64(len(r.value)))
		body = append(body, r.value...)
		body = binary.AppendVarint(body, int64(len(r.headers)))
		for _, h := range r.headers {
			body = binary.AppendVarint(body, int64(len(h.key)))
			body = append(body, h.key...)
			body = binary.AppendVarint(body, int64(len(h.value)))
			body = append(body, h.value...)
		}
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
		if ts := s.firstTS + r.tsDelta; ts > maxTS {
			maxTS = ts
		}
	}
	b := make([]byte, 0, batchHeaderLen+len(recs))
	b = binary.BigEndian.AppendUint64(b, 0)                                   // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(batchHeaderLen-12+len(recs))) // length
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)                          // partition leader epoch
	b = append(b, 2)                                                          // magic
	b = binary.BigEndian.AppendUint32(b, 0)                                   // crc, below
	b = binary.BigEndian.AppendUint16(b, uint16(s.attributes))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.records)-1))
	b = binary.BigEndian.AppendUint64(b, uint64(s.firstTS))
	b = binary.BigEndian.AppendUint64(b, uint64(maxTS))
	b = binary.BigEndian.AppendUint64(b, uint64(s.producerID))
	b = binary.BigEndian.AppendUint16(b, uint16(s.producerEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(s.baseSequence))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.records)))
	b = append(b, recs...)
	fixCRC(b)
	return b
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// fetchedBatch is one stored batch as a fetch returned it, with its records decoded
// (uncompressed batches only).
type fetchedBatch struct {
	baseOffset int64
	size       int
	firstTS    int64
	records    []got
}

// parseBatches splits fetched record data into whole batches; a trailing partial batch is an
// error (Inlet returns whole batches only).
func parseBatches(t testing.TB, data []byte) []fetchedBatch {
	t.Helper()
	var out []fetchedBatch
	for len(data) > 0 {
		if len(data) < batchHeaderLen {
			t.Fatalf("fetched data ends in a %d-byte partial batch header", len(data))
		}
		n := 12 + int(binary.BigEndian.Uint32(data[offLength:]))
		if n > len(data) {
			t.Fatalf("fetched data ends in a partial batch (%d of %d bytes)", len(data), n)
		}
		b := data[:n]
		data = data[n:]
		if crc := crc32.Checksum(b[offAttributes:], castagnoli); crc != binary.BigEndian.Uint32(b[offCRC:]) {
			t.Fatalf("fetched batch fails its CRC")
		}
		fb := fetchedBatch{
			baseOffset: int64(binary.BigEndian.Uint64(b)),
			size:       n,
			firstTS:    int64(binary.BigEndian.Uint64(b[27:])),
		}
		if binary.BigEndian.Uint16(b[offAttributes:])&7 == 0 {
			fb.records = parseRecords(t, fb.baseOffset, b[batchHeaderLen:], int(binary.BigEndian.Uint32(b[offNumRecords:])))
		}
		out = append(out, fb)
	}
	return out
}

func parseRecords(t testing.TB, base int64, b []byte, n int) []got {
	t.Helper()
	varint := func() int64 {
		v, k := binary.Varint(b)
		if k <= 0 {
			t.Fatalf("bad varint in fetched record")
		}
		b = b[k:]
		return v
	}
	bytesN := func() []byte {
		l := varint()
		if l < 0 {
			return nil
		}
		out := b[:l]
		b = b[l:]
		return out
	}
	var out []got
	for i := 0; i < n; i++ {
		varint() // length
		b = b[1:]
		varint() // timestamp delta
		od := varint()
		g := got{offset: base + od}
		g.key = bytesN()
		g.value = bytesN()
		for h := varint(); h > 0; h-- {
			k := bytesN()
			v := bytesN()
			g.headers = append(g.headers, header{string(k), string(v)})
		}
		out = append(out, g)
	}
	return out
}
