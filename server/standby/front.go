// Package standby is the front a --standby node serves on its listeners while it waits for
// its bucket prefix: it answers Kafka as a second broker that leads nothing, so that a client
// that reaches it (a bootstrap address, or a broker the writer's Metadata lists) is sent on to
// the writer rather than refused a connection.
//
// What it answers (answer.go):
//   - ApiVersions: the node's own APIs and versions (server.SupportedAPIs), as the writer
//     would.
//   - Metadata and DescribeCluster: forwarded to the writer, its answer relayed byte for byte
//     (it lists every node of --cluster-nodes and leads every partition). The writer is found
//     by asking the other nodes (writer.go): the one that answers with itself as controller.
//     When none answers within a short timeout, every partition of the last answer is
//     LEADER_NOT_AVAILABLE with leader -1 (Kafka's answer while no leader is elected) and the
//     brokers are the nodes of --cluster-nodes: clients retry, and find the next writer.
//   - FindCoordinator: the writer's node (COORDINATOR_NOT_AVAILABLE while none answers).
//   - Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: NOT_LEADER_OR_FOLLOWER; the group and
//     transaction APIs and InitProducerId: NOT_COORDINATOR (ListGroups and ListTransactions:
//     none, which is what a Kafka broker that coordinates nothing answers); every admin API:
//     NOT_CONTROLLER. Each is retriable: a client refreshes its metadata and goes to the writer.
//
// The front asks the writer as an unauthenticated client, so it serves only the listeners
// whose clients are that (notServed: no SASL, as a standby holds no users; no TLS client
// certificates; no prefixes). It is plain Go networking (a goroutine per connection, one
// request at a time) since it carries a few metadata requests, not produce traffic.
//
// Bounds, since any client can reach it: a frame's length is checked against MaxRequestBytes
// before anything is allocated, and its bytes come out of a budget shared by every connection
// (frameBudget, at least one largest frame) so that many connections sending large frames
// wait rather than take memory; at most MaxConnections are open (one more is closed at once);
// a connection silent for IdleTimeout is closed, and so is one that sends garbage (a bad length,
// header or body: the stream cannot be trusted any more). Forwarding to the writer goes over
// one connection per node, one request at a time, so a standby adds at most one request in
// flight to the writer whatever its clients do.
//
// Files: front.go (listeners, connections, framing), answer.go (what each API is answered),
// writer.go (finding the writer and forwarding to it). Locks: Front.mu guards the connection
// set; each peer's slot serialises its connection; Front.lastMu guards the last Metadata.
package standby

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/conn"
	"inlet/server"
	"inlet/wire"
)

// Defaults of Config's bounds.
const (
	DefaultMaxConnections = 1024
	DefaultIdleTimeout    = 60 * time.Second
	// DefaultForwardTimeout bounds one Metadata relayed to the writer, the writer's search
	// included: a client waits at most this long for an answer before the fallback.
	DefaultForwardTimeout = 2 * time.Second
	// frameBudget is the memory every connection's frames share (at least one frame of
	// MaxRequestBytes).
	frameBudget = 64 << 20
	// writeTimeout bounds writing one answer to a client that does not read.
	writeTimeout = 10 * time.Second
)

// Config is a front's configuration.
type Config struct {
	// Listeners are the node's; those with SASL are not served (a standby holds no users).
	Listeners []conn.Listener
	// NodeID is this node's id; Nodes is --cluster-nodes, this node included.
	NodeID int32
	Nodes  []server.Node
	// MaxRequestBytes is the largest frame read (the node's --max-request-bytes).
	MaxRequestBytes int
	// MaxConnections bounds the open connections over every listener (0:
	// DefaultMaxConnections).
	MaxConnections int
	// IdleTimeout closes a connection that sends nothing this long (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// ForwardTimeout bounds a forward to the writer (0: DefaultForwardTimeout).
	ForwardTimeout time.Duration
	// SupportedFeatures and FinalizedFeatures are ApiVersions v3+'s features (KIP-584), the
	// server's.
	SupportedFeatures []kmsg.ApiVersionsResponseSupportedFeature
	FinalizedFeatures []kmsg.ApiVersionsResponseFinalizedFeature
	Logger            *slog.Logger
}

// Front is a standby's front, serving until Close.
type Front struct {
	cfg    Config
	lns    []net.Listener
	budget *budget
	peers  []*peer // the other nodes of Nodes
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{} // closed by Close

	apis     []kmsg.ApiVersionsResponseApiKey // server.SupportedAPIs
	versions map[int16][2]int16               // the same by key: min, max

	writer writerCache

	lastMu    sync.Mutex            // guards what the writer's Metadata answers told
	topics    map[string]knownTopic // by name
	clusterID *string
}

// Start listens on every listener without SASL and serves until Close.
func Start(cfg Config) (*Front, error) {
	if cfg.MaxRequestBytes <= 0 {
		return nil, errors.New("standby: MaxRequestBytes not set")
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = DefaultForwardTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Front{cfg: cfg, budget: newBudget(max(frameBudget, int64(cfg.MaxRequestBytes))), conns: map[net.Conn]struct{}{}, done: make(chan struct{}),
		apis: server.SupportedAPIs(), versions: map[int16][2]int16{}}
	for _, k := range f.apis {
		f.versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for _, n := range cfg.Nodes {
		if n.ID != cfg.NodeID {
			f.peers = append(f.peers, newPeer(n, cfg.MaxRequestBytes))
		}
	}
	for _, l := range cfg.Listeners {
		if why := notServed(l); why != "" {
			cfg.Logger.Info("standby: not answering on a listener", "listener", l.Name, "why", why)
			continue
		}
		ln, err := net.Listen("tcp", l.Address)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("standby: listener %s: %w", l.Name, err)
		}
		if l.TLS != nil {
			ln = tls.NewListener(ln, l.TLS)
		}
		f.lns = append(f.lns, ln)
	}
	for _, ln := range f.lns {
		f.wg.Add(1)
		go f.accept(ln)
	}
	return f, nil
}

// notServed is why the front does not serve l ("" when it does). It asks the writer as an
// unauthenticated client of the writer's first listener, so it serves only clients that are
// no more than that: none that authenticate (SASL: a standby holds no users; a TLS client
// certificate names a principal) or that their listener restricts to prefixes. Their
// requests would be answered for another principal than theirs.
func notServed(l conn.Listener) string {
	switch {
	case strings.HasPrefix(strings.ToUpper(l.Protocol), "SASL_"):
		return "SASL: a standby holds no users"
	case l.TLS != nil && l.TLS.ClientAuth != tls.NoClientCert:
		return "TLS client certificates name principals, which the writer would not see through a standby"
	case l.Anonymous != nil:
		return "its clients are restricted to prefixes, which the writer would not see through a standby"
	}
	return ""
}

// Addrs are the bound addresses, in the order of the listeners served.
func (f *Front) Addrs() []string {
	out := make([]string, len(f.lns))
	for i, ln := range f.lns {
		out[i] = ln.Addr().String()
	}
	return out
}

// Close closes the listeners, every connection and the connections to the other nodes, and
// returns once every goroutine of the front has ended: the ports are free for the server.
func (f *Front) Close() {
	f.mu.Lock()
	if !f.closed {
		close(f.done)
	}
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	for _, ln := range f.lns {
		_ = ln.Close()
	}
	f.budget.close()
	for _, p := range f.peers {
		p.close()
	}
	f.wg.Wait()
}

// accept accepts until the listener is closed; an error that is not the close backs off (5 ms
// doubling to 1 s, as net/http's Server.Serve) and goes on.
func (f *Front) accept(ln net.Listener) {
	defer f.wg.Done()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			f.cfg.Logger.Warn("standby: accept", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-f.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		f.mu.Lock()
		if f.closed || len(f.conns) >= f.cfg.MaxConnections {
			f.mu.Unlock()
			_ = c.Close()
			continue
		}
		f.conns[c] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(c)
	}
}

// serve reads and answers c's requests in order until c closes, idles, or sends garbage.
func (f *Front) serve(c net.Conn) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		_ = c.Close()
	}()
	var lenBuf [4]byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(f.cfg.IdleTimeout))
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		n := int32(binary.BigEndian.Uint32(lenBuf[:]))
		if n < 8 || int(n) > f.cfg.MaxRequestBytes {
			f.protocolError(c, "bad frame length", fmt.Errorf("%d bytes, want 8 to %d", n, f.cfg.MaxRequestBytes))
			return
		}
		if !f.budget.acquire(int64(n)) {
			return // closing
		}
		frame := make([]byte, n)
		_, err := io.ReadFull(c, frame)
		var out []byte
		if err == nil {
			out, err = f.answer(frame)
		}
		f.budget.release(int64(n))
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) {
				f.protocolError(c, "bad request", err)
			}
			return
		}
		_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (f *Front) protocolError(c net.Conn, what string, err error) {
	f.cfg.Logger.Debug("standby: closing a connection", "remote", c.RemoteAddr().String(), "why", what, "err", err)
}

// answer is the whole response frame (length prefix included) to the request frame (without
// its length prefix); an error closes the connection.
func (f *Front) answer(frame []byte) ([]byte, error) {
	hdr, err := wire.ParseRequestHeader(frame)
	if err != nil {
		return nil, err
	}
	return f.respond(hdr, frame[hdr.BodyOffset:])
}

// encode is resp's frame answering hdr: response header v1 (with its tag buffer) for a
// flexible version, but v0 for ApiVersions always (KIP-511).
func encode(hdr wire.RequestHeader, resp kmsg.Response) []byte {
	resp.SetVersion(hdr.APIVersion)
	b := wire.AppendResponseHeader(make([]byte, 0, 512), hdr.CorrelationID, wire.ResponseHeaderFlexible(hdr.APIKey, hdr.APIVersion))
	b = resp.AppendTo(b)
	wire.PatchFrameLength(b)
	return b
}

// budget is a byte semaphore shared by the connections' frames.
type budget struct {
	mu     sync.Mutex
	cond   *sync.Cond
	free   int64
	closed bool
}

func newBudget(n int64) *budget {
	b := &budget{free: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire takes n (at most the budget's size), waiting while it is not free; false once closed.
func (b *budget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n && !b.closed {
		b.cond.Wait()
	}
	if b.closed {
		return false
	}
	b.free -= n
	return true
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *budget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}
