package standby

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/auth"
	"inlet/batchlog"
	"inlet/conn"
	"inlet/meta"
	"inlet/server"
	"inlet/wire"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// freeAddr is a loopback address no one listens on (bound, then released).
func freeAddr(t *testing.T) (string, server.Node) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	return addr.String(), server.Node{Host: "127.0.0.1", Port: int32(addr.Port)}
}

// writer is a real node (server.Server on a batch log) listening at addr as node 1.
type writer struct {
	srv  *server.Server
	blog *batchlog.Log
}

func startWriter(t *testing.T, addr string, nodes []server.Node) *writer {
	t.Helper()
	dir := t.TempDir()
	cat, err := meta.Open(meta.Options{Dir: dir, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Listen: addr, NodeID: 1, Nodes: nodes, AutoCreateTopics: true, DefaultPartitions: 2,
		Workers: 1, Logger: discard(), GroupInitialRebalanceDelay: -1}, cat)
	if err != nil {
		t.Fatal(err)
	}
	blog, err := batchlog.Open(batchlog.Options{Dir: dir, Logger: discard(), Meta: cat, Txns: srv.Txns(), MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(blog, nil); err != nil {
		t.Fatal(err)
	}
	w := &writer{srv: srv, blog: blog}
	t.Cleanup(w.stop)
	return w
}

func (w *writer) stop() {
	if w.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.srv.Shutdown(ctx)
	_ = w.blog.Close()
	w.srv = nil
}

// pair is a writer (node 1, unless down) and a front (node 2) that know each other.
func pair(t *testing.T, writerUp bool, mod func(*Config)) (*Front, *writer, []server.Node) {
	t.Helper()
	waddr, wn := freeAddr(t)
	faddr, fn := freeAddr(t)
	wn.ID, fn.ID = 1, 2
	nodes := []server.Node{wn, fn}
	var w *writer
	if writerUp {
		w = startWriter(t, waddr, nodes)
	}
	cfg := Config{Listeners: []conn.Listener{{Name: "PLAINTEXT", Address: faddr, Protocol: "PLAINTEXT"}}, NodeID: 2, Nodes: nodes,
		MaxRequestBytes: 1 << 20, ForwardTimeout: 500 * time.Millisecond, Logger: discard()}
	if mod != nil {
		mod(&cfg)
	}
	f, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, w, nodes
}

// ask sends req to the front itself (not to a broker its answers name).
func ask(t *testing.T, f *Front, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Addrs()[0]), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func metadataOf(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = true
	return req
}

// TestMetadataRelayedFromTheWriter: the front's Metadata is the writer's answer: the writer
// the controller and every partition's leader.
func TestMetadataRelayedFromTheWriter(t *testing.T) {
	f, _, nodes := pair(t, true, nil)
	ask(t, f, metadataOf("t")) // creates it (LEADER_NOT_AVAILABLE meanwhile, as Kafka)
	resp := ask(t, f, metadataOf("t")).(*kmsg.MetadataResponse)
	if resp.ControllerID != 1 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("controller %d, topics %+v", resp.ControllerID, resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Leader != 1 {
			t.Errorf("partition %d: error %d, leader %d", p.Partition, p.ErrorCode, p.Leader)
		}
	}
	found := false
	for _, b := range resp.Brokers {
		found = found || (b.NodeID == 1 && b.Port == nodes[0].Port)
	}
	if !found {
		t.Errorf("brokers %+v lack the writer", resp.Brokers)
	}
	if w, ok := f.Writer(); !ok || w.ID != 1 {
		t.Errorf("Writer() = %+v, %v", w, ok)
	}
}

// TestLeaderNotAvailableWithoutAWriter: with no writer, a topic the writer told of has every
// partition LEADER_NOT_AVAILABLE with leader -1, one never told of is LEADER_NOT_AVAILABLE,
// the brokers are --cluster-nodes and there is no controller; FindCoordinator is
// COORDINATOR_NOT_AVAILABLE.
func TestLeaderNotAvailableWithoutAWriter(t *testing.T) {
	f, w, nodes := pair(t, true, nil)
	ask(t, f, metadataOf("t"))
	ask(t, f, metadataOf("t")) // its partitions, once created
	w.stop()
	resp := ask(t, f, metadataOf("t", "never")).(*kmsg.MetadataResponse)
	if resp.ControllerID != -1 || len(resp.Brokers) != len(nodes) || len(resp.Topics) != 2 {
		t.Fatalf("controller %d, brokers %+v, topics %d", resp.ControllerID, resp.Brokers, len(resp.Topics))
	}
	for _, tp := range resp.Topics {
		switch *tp.Topic {
		case "t":
			if tp.ErrorCode != 0 || len(tp.Partitions) != 2 {
				t.Fatalf("t: error %d, %d partitions", tp.ErrorCode, len(tp.Partitions))
			}
			for _, p := range tp.Partitions {
				if p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 {
					t.Errorf("t[%d]: error %d, leader %d", p.Partition, p.ErrorCode, p.Leader)
				}
			}
		case "never":
			if tp.ErrorCode != kerr.LeaderNotAvailable.Code {
				t.Errorf("never: error %d", tp.ErrorCode)
			}
		}
	}
	if _, ok := f.Writer(); ok {
		t.Error("a writer is still named")
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
	if r := ask(t, f, fc).(*kmsg.FindCoordinatorResponse); len(r.Coordinators) != 1 || r.Coordinators[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("FindCoordinator without a writer: %+v", r)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	if r := ask(t, f, dc).(*kmsg.DescribeClusterResponse); r.ControllerID != -1 || len(r.Brokers) != 2 {
		t.Errorf("DescribeCluster without a writer: %+v", r)
	}
}

// TestProduceRefusedNotLeader: a produce to the front is NOT_LEADER_OR_FOLLOWER.
func TestProduceRefusedNotLeader(t *testing.T) {
	f, _, _ := pair(t, true, nil)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := ask(t, f, req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce: %+v", resp.Topics)
	}
}

// TestFindCoordinatorNamesTheWriter: the coordinator of every group is the writer, at its
// --cluster-nodes address.
func TestFindCoordinatorNamesTheWriter(t *testing.T) {
	f, _, nodes := pair(t, true, nil)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "g"
	req.CoordinatorKeys = []string{"g", "h"}
	resp := ask(t, f, req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 2 {
		t.Fatalf("coordinators %+v", resp.Coordinators)
	}
	for _, c := range resp.Coordinators {
		if c.ErrorCode != 0 || c.NodeID != 1 || c.Host != nodes[0].Host || c.Port != nodes[0].Port {
			t.Errorf("coordinator of %s: %+v", c.Key, c)
		}
	}
}

// TestClientFindsTheWriterThroughTheFront: a client that knows only the front's address
// produces: the front's Metadata sends it to the writer.
func TestClientFindsTheWriterThroughTheFront(t *testing.T) {
	f, w, _ := pair(t, true, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.Addrs()[0]), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i := range 10 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	if tp, ok := w.blog.Topic("t"); ok {
		for _, p := range tp.Partitions {
			n += p.HighWatermark()
		}
	}
	if n != 10 {
		t.Fatalf("the writer holds %d records, want 10", n)
	}
}

// TestFrontsDoNotAskEachOther: two standbys and no writer: each answers without a writer at
// once, rather than forwarding to the other in a loop.
func TestFrontsDoNotAskEachOther(t *testing.T) {
	a1, n1 := freeAddr(t)
	a2, n2 := freeAddr(t)
	n1.ID, n2.ID = 1, 2
	nodes := []server.Node{n1, n2}
	var fronts []*Front
	for i, a := range []string{a1, a2} {
		f, err := Start(Config{Listeners: []conn.Listener{{Address: a}}, NodeID: int32(i + 1), Nodes: nodes, MaxRequestBytes: 1 << 20,
			ForwardTimeout: 5 * time.Second, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fronts = append(fronts, f)
	}
	start := time.Now()
	resp := ask(t, fronts[0], metadataOf("t")).(*kmsg.MetadataResponse)
	if resp.ControllerID != -1 {
		t.Fatalf("controller %d", resp.ControllerID)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("took %v", took)
	}
}

// rawFrame writes a request frame of key/version and body to c.
func rawFrame(key, version int16, corr int32, body []byte) []byte {
	b := make([]byte, 4, 64+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	b = append(b, body...)
	wire.PatchFrameLength(b)
	return b
}

// closedWithin reports whether the front closes c within d (reading gives EOF or a reset).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	var b [64]byte
	for {
		_, err := c.Read(b[:])
		if err != nil {
			ne, ok := err.(net.Error)
			return !(ok && ne.Timeout())
		}
	}
}

// TestHostileClientsAreBounded: a frame over MaxRequestBytes, garbage in a header and an
// unknown API key close the connection; a connection past MaxConnections is closed at once; a
// silent one is closed after IdleTimeout; and a good request on a good connection is answered.
func TestHostileClientsAreBounded(t *testing.T) {
	f, _, _ := pair(t, false, func(c *Config) { c.MaxConnections, c.IdleTimeout, c.MaxRequestBytes = 3, 300*time.Millisecond, 1024 })
	dial := func() net.Conn {
		c, err := net.Dial("tcp", f.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for name, frame := range map[string][]byte{
		"frame over the maximum": {0, 0, 0x10, 0},
		"negative length":        {0xff, 0xff, 0xff, 0xff},
		"short frame":            {0, 0, 0, 2, 0, 0},
		"unknown api key":        rawFrame(999, 0, 1, nil),
		"client id past frame":   {0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 50},
		"bad body":               rawFrame(3, 12, 1, []byte{1, 2}),
	} {
		c := dial()
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(c, 2*time.Second) {
			t.Errorf("%s: connection left open", name)
		}
	}
	// Idle: closed after IdleTimeout.
	idle := dial()
	start := time.Now()
	if !closedWithin(idle, 3*time.Second) || time.Since(start) < 200*time.Millisecond {
		t.Errorf("idle connection: closed after %v", time.Since(start))
	}
	// Connections past the bound: 3 held open, the 4th closed at once.
	var held []net.Conn
	for range 3 {
		held = append(held, dial())
	}
	time.Sleep(50 * time.Millisecond) // let the front accept them
	if !closedWithin(dial(), time.Second) {
		t.Error("a connection past MaxConnections was kept")
	}
	// A good request on a held connection is answered.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	if _, err := held[0].Write(rawFrameFlexible(18, 3, 7, av.AppendTo(nil))); err != nil {
		t.Fatal(err)
	}
	_ = held[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	var hdr [8]byte
	if _, err := io.ReadFull(held[0], hdr[:]); err != nil || binary.BigEndian.Uint32(hdr[4:]) != 7 {
		t.Fatalf("ApiVersions on a held connection: %v, %x", err, hdr)
	}
}

func rawFrameFlexible(key, version int16, corr int32, body []byte) []byte {
	b := rawFrame(key, version, corr, nil)
	b = append(b, 0) // no tagged fields
	b = append(b, body...)
	wire.PatchFrameLength(b)
	return b
}

// TestCloseFreesTheListeners: after Close the front's connections are closed and its
// addresses can be bound again at once (the server takes them at a takeover).
func TestCloseFreesTheListeners(t *testing.T) {
	f, _, _ := pair(t, false, nil)
	addr := f.Addrs()[0]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(20 * time.Millisecond)
	f.Close()
	if !closedWithin(c, time.Second) {
		t.Error("a connection outlived Close")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("binding %s after Close: %v", addr, err)
	}
	ln.Close()
}

// TestEveryServedAPIIsAnswered: every API the node serves, at each version it serves, gets an
// answer from the front (the SASL ones excepted, which no listener of a front takes), and
// the refusals carry the code their kind of API is refused with.
func TestEveryServedAPIIsAnswered(t *testing.T) {
	f, _, _ := pair(t, false, func(c *Config) { c.ForwardTimeout = 50 * time.Millisecond })
	for _, k := range server.SupportedAPIs() {
		if k.ApiKey == saslHandshakeKey || k.ApiKey == saslAuthenticateKey {
			continue
		}
		for v := k.MinVersion; v <= k.MaxVersion; v++ {
			req := kmsg.RequestForKey(k.ApiKey)
			req.SetVersion(v)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = -1 // acks=0 is never answered (TestProduceWithoutAcksClosesTheConnection)
			}
			hdr := wire.RequestHeader{APIKey: k.ApiKey, APIVersion: v, CorrelationID: 1}
			out, err := f.respond(hdr, req.AppendTo(nil))
			if err != nil || len(out) < 8 {
				t.Errorf("api key %d v%d: %v", k.ApiKey, v, err)
			}
		}
	}
	// The kind of each refusal.
	for key, want := range map[int16]int16{0: kerr.NotLeaderForPartition.Code, 21: kerr.NotLeaderForPartition.Code, 11: kerr.NotCoordinator.Code, 22: kerr.NotCoordinator.Code, 19: kerr.NotController.Code} {
		if got := refusal(key); got != want {
			t.Errorf("api key %d refused %d, want %d", key, got, want)
		}
	}
}

// TestOnlyUnauthenticatedListenersAreServed: the front does not open a SASL listener, one
// that asks for TLS client certificates, or one whose clients are restricted to prefixes:
// the writer would answer their requests for another principal.
func TestOnlyUnauthenticatedListenersAreServed(t *testing.T) {
	open, _ := freeAddr(t)
	ls := []conn.Listener{
		{Name: "SASL", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"},
		{Name: "MTLS", Address: "127.0.0.1:0", Protocol: "SSL", TLS: &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}},
		{Name: "PREFIXED", Address: "127.0.0.1:0", Protocol: "PLAINTEXT", Anonymous: &auth.Principal{Name: "ANONYMOUS", TopicPrefixes: []string{"a"}}},
		{Name: "OPEN", Address: open, Protocol: "PLAINTEXT"},
	}
	f, err := Start(Config{Listeners: ls, NodeID: 1, Nodes: []server.Node{{ID: 1, Host: "127.0.0.1", Port: 1}}, MaxRequestBytes: 1 << 20, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Addrs(); len(got) != 1 || got[0] != open {
		t.Fatalf("served %v, want only %s", got, open)
	}
}

// TestProduceWithoutAcksClosesTheConnection: a produce with acks=0 is never answered, so the
// front closes the connection instead (as Kafka on an error), and the client refreshes.
func TestProduceWithoutAcksClosesTheConnection(t *testing.T) {
	f, _, _ := pair(t, true, nil)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, 0, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	c, err := net.DialTimeout("tcp", f.Addrs()[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, req, 1)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 64))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after an acks=0 produce the front answered %d bytes, err %v; want the connection closed", n, err)
	}
}
