package crashtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Liveness under attack, against the real binary: while a hostile client runs, a legitimate
// kgo producer and ApiVersions on a fresh connection keep being answered (p99 under 1 s), the
// node's peak resident set stays under its in-flight budget plus 64 MiB, and once the
// attackers have closed everything is answered at once. One test per attack: a
// permanent stall behind parked long polls, unbounded unread replies, half-sent frames that
// push out real clients.

const (
	livenessP99     = time.Second
	bystanderTimout = 5 * time.Second // a request that fails counts as this long
	attackFor       = 5 * time.Second
)

// bystander is a legitimate client kept busy while an attack runs: a kgo producer sending one
// batch at a time, and ApiVersions on a fresh connection each round. It records how long each
// took; a failure counts as bystanderTimout.
type bystander struct {
	t        *testing.T
	cl       *kgo.Client
	versions string // where the fresh connections go
	value    []byte

	mu                 sync.Mutex
	produce, apiVers   []time.Duration
	produceErr, verErr error
	stop               chan struct{}
	wg                 sync.WaitGroup
}

// newBystander makes the producer (opts added to its seed) and produces one record, so the
// topic exists and the connections are up before any attack.
func newBystander(t *testing.T, seed, versions, topic string, valueSize int, opts ...kgo.Opt) *bystander {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(seed), kgo.ClientID("crashtest-bystander"), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(int32(valueSize + 4096)),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // its requests are as large as its records
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A client whose requests a hung node never answers may not close either.
		done := make(chan struct{})
		go func() { cl.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	})
	b := &bystander{t: t, cl: cl, versions: versions, value: make([]byte, valueSize), stop: make(chan struct{})}
	if _, err := b.produceOne(20 * time.Second); err != nil {
		t.Fatalf("bystander: first produce: %v", err)
	}
	if _, err := freshAPIVersions(versions, bystanderTimout); err != nil {
		t.Fatalf("bystander: first ApiVersions: %v", err)
	}
	return b
}

// run measures until halt.
func (b *bystander) run() {
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		for b.running() {
			d, err := b.produceOne(bystanderTimout)
			b.mu.Lock()
			if err != nil {
				d, b.produceErr = bystanderTimout, err
			}
			b.produce = append(b.produce, d)
			b.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() {
		defer b.wg.Done()
		for b.running() {
			d, err := freshAPIVersions(b.versions, bystanderTimout)
			b.mu.Lock()
			if err != nil {
				d, b.verErr = bystanderTimout, err
			}
			b.apiVers = append(b.apiVers, d)
			b.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// produceOne produces a record and waits for its answer at most timeout (kgo waits for a
// request it has written whatever its context says, so the wait is bounded here).
func (b *bystander) produceOne(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	b.cl.Produce(ctx, &kgo.Record{Value: b.value}, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(timeout):
		return timeout, fmt.Errorf("no answer within %v", timeout)
	}
}

func (b *bystander) running() bool {
	select {
	case <-b.stop:
		return false
	default:
		return true
	}
}

// halt stops measuring and checks the p99 of both.
func (b *bystander) halt(what string) {
	b.t.Helper()
	close(b.stop)
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range []struct {
		name string
		ds   []time.Duration
		err  error
	}{{"kgo produce", b.produce, b.produceErr}, {"fresh ApiVersions", b.apiVers, b.verErr}} {
		p := p99(m.ds)
		b.t.Logf("%s: %s during the attack: %d requests, p99 %v, max %v", what, m.name, len(m.ds), p, slices.Max(append([]time.Duration{0}, m.ds...)))
		if len(m.ds) == 0 || p >= livenessP99 {
			b.t.Errorf("%s: %s p99 %v over %d requests during the attack, want under %v (last error: %v)", what, m.name, p, len(m.ds), livenessP99, m.err)
		}
	}
}

// answeredAtOnce checks that, the attack over, a produce and a fresh ApiVersions are each
// answered within livenessP99.
func (b *bystander) answeredAtOnce(what string) {
	b.t.Helper()
	if d, err := b.produceOne(bystanderTimout); err != nil || d >= livenessP99 {
		b.t.Errorf("%s: after the attack a produce took %v (err %v), want under %v", what, d, err, livenessP99)
	}
	if d, err := freshAPIVersions(b.versions, bystanderTimout); err != nil || d >= livenessP99 {
		b.t.Errorf("%s: after the attack a fresh ApiVersions took %v (err %v), want under %v", what, d, err, livenessP99)
	}
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*99+99)/100 - 1
	return s[min(i, len(s)-1)]
}

// freshAPIVersions dials addr, sends ApiVersions v0 and reads its reply: how long that took.
func freshAPIVersions(addr string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(start.Add(timeout))
	if _, err := c.Write(apiVersionsV0(1)); err != nil {
		return 0, err
	}
	var size [4]byte
	if _, err := readFull(c, size[:]); err != nil {
		return 0, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := readFull(c, body); err != nil {
		return 0, err
	}
	if len(body) < 6 || binary.BigEndian.Uint32(body) != 1 || binary.BigEndian.Uint16(body[4:]) != 0 {
		return 0, fmt.Errorf("bad ApiVersions reply of %d bytes", len(body))
	}
	return time.Since(start), nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// apiVersionsV0 is the 14-byte ApiVersions v0 request: size 10, key 18, version 0, the
// correlation id, a null client id.
func apiVersionsV0(corr int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 10)
	b = binary.BigEndian.AppendUint16(b, 18)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return binary.BigEndian.AppendUint16(b, 0xffff)
}

// checkRSS fails if the node's peak resident set passed budget plus 64 MiB.
func checkRSS(t *testing.T, n *inlet, budget int64, what string) {
	t.Helper()
	rss := n.peakRSS()
	t.Logf("%s: peak RSS %d MiB (budget %d MiB)", what, rss>>20, budget>>20)
	if rss > budget+64<<20 {
		t.Errorf("%s: peak RSS %d MiB, want under the budget plus 64 MiB (%d MiB)", what, rss>>20, (budget+64<<20)>>20)
	}
}

// memoryBounded is how the liveness tests run the node: as an operator who wants a bound
// does (GOMEMLIMIT, docs/operations.md "Hostile clients"), and with no fetch cache, whose memory is not
// what is measured.
func memoryBounded(t *testing.T, budget int64) []string {
	t.Setenv("GOMEMLIMIT", strconv.FormatInt(budget+32<<20, 10))
	return []string{"--inflight-budget", strconv.FormatInt(budget, 10), "--fetch-cache", "0"}
}

// TestParkedFetchStallsNoOne: with --inflight-budget 64MiB --max-request-bytes 32MiB, two
// connections each send a Fetch with MaxWait and MinBytes 2147483647 at the high watermark
// and pipeline 30 MiB Produce frames behind it. The parked Fetch gives its budget back and
// holds its connection (nothing behind it is read), so no event loop waits for budget that
// frames behind it hold: other clients are answered throughout, and at once when the
// attackers have closed. (Before: every client hung, also after the attackers closed, since
// a loop that waits cannot process the closes.)
func TestParkedFetchStallsNoOne(t *testing.T) {
	const budget = 64 << 20
	n := startInlet(t, append(memoryBounded(t, budget), "--max-request-bytes", "32MiB")...)
	const topic = "parked"
	b := newBystander(t, n.addr(), n.addr(), topic, 1000)
	hw := dialRaw(t, n.addr()).listLatest(topic, 0)

	var attackers []net.Conn
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		rc := dialRaw(t, n.addr())
		attackers = append(attackers, rc.c)
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID = 11, -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 2147483647, 2147483647, 2147483647
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, hw, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		fetch, _ := rc.encode(req)
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			_ = c.SetWriteDeadline(time.Now().Add(attackFor))
			if _, err := c.Write(fetch); err != nil {
				return
			}
			// 30 MiB Produce frames (size, api key 0, version 9, then zeros) behind it.
			const frame = 30 << 20
			produce := binary.BigEndian.AppendUint32(nil, frame)
			produce = append(produce, 0, 0, 0, 9, 0, 0, 0, 2)
			produce = append(produce, make([]byte, frame-8)...)
			for k := 0; k < 3; k++ {
				if _, err := c.Write(produce); err != nil {
					return
				}
			}
		}(rc.c)
	}
	b.run()
	time.Sleep(attackFor)
	b.halt("parked Fetch")
	for _, c := range attackers {
		c.Close()
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	b.answeredAtOnce("parked Fetch")
	checkRSS(t, n, budget, "parked Fetch")
}

// pipelineUnread sends 14-byte ApiVersions v0 requests on a connection to addr, as fast as
// the node takes them, and never reads; when the node closes it, it connects again; after
// attackFor it closes. It reports the bytes sent and how many connections the node closed.
func pipelineUnread(t *testing.T, addr string) (sent, closed int) {
	t.Helper()
	chunk := make([]byte, 0, 64<<10)
	for corr := int32(1); len(chunk)+14 <= cap(chunk); corr++ {
		chunk = append(chunk, apiVersionsV0(corr)...)
	}
	deadline := time.Now().Add(attackFor)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetWriteDeadline(deadline)
		for {
			k, err := c.Write(chunk)
			sent += k
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					closed++
				}
				break
			}
		}
		c.Close()
	}
	return sent, closed
}

// TestUnreadRepliesAreBounded: a connection pipelining 14-byte ApiVersions v0 requests and
// never reading, on the gnet listener and on a stream (SASL) listener before authentication.
// Unwritten replies count against the budget and a connection whose replies are unread stops
// being framed, so the node's memory stays bounded and other clients are answered. (Before:
// replies piled up in gnet's outbound buffer or the stream writer's queue, over 1 GiB.)
func TestUnreadRepliesAreBounded(t *testing.T) {
	const budget = 64 << 20
	for _, listener := range []string{"gnet", "stream"} {
		t.Run(listener, func(t *testing.T) {
			saslPort := freePort(t)
			path := filepath.Join(t.TempDir(), "inlet.yaml")
			usersConfig(t, path, saslPort, "alice")
			n := startInlet(t, append(memoryBounded(t, budget), "--config", path)...)
			target := n.addr()
			if listener == "stream" {
				target = net.JoinHostPort("127.0.0.1", strconv.Itoa(saslPort))
			}
			b := newBystander(t, n.addr(), target, "unread", 1000)
			b.run()
			sent, closed := pipelineUnread(t, target)
			b.halt("unread replies (" + listener + ")")
			t.Logf("attacker sent %d MiB; the node closed %d of its connections", sent>>20, closed)
			time.Sleep(200 * time.Millisecond)
			b.answeredAtOnce("unread replies (" + listener + ")")
			checkRSS(t, n, budget, "unread replies ("+listener+")")
		})
	}
}

// TestHalfSentFramesBeforeAuthentication: 300 unauthenticated connections to a SASL listener
// each send a length prefix of 524288 and 65,537 bytes, then stall. Before authentication
// frames are charged to a budget of their own (--sasl-server-max-inflight-bytes) and only
// for what has arrived, so an authenticated producer's 1 MiB requests keep being answered.
// (Before: each was charged 512 KiB of the shared budget, 256 filled 128 MiB, and the
// producer's requests were refused with its connection reset.)
func TestHalfSentFramesBeforeAuthentication(t *testing.T) {
	const budget = 128 << 20
	saslPort := freePort(t)
	path := filepath.Join(t.TempDir(), "inlet.yaml")
	usersConfig(t, path, saslPort, "alice")
	n := startInlet(t, append(memoryBounded(t, budget), "--config", path)...)
	saslAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(saslPort))
	b := newBystander(t, saslAddr, saslAddr, "alice.live", 1000<<10,
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))

	var attackers []net.Conn
	defer func() {
		for _, c := range attackers {
			c.Close()
		}
	}()
	b.run()
	frame := binary.BigEndian.AppendUint32(nil, 524288)
	frame = append(frame, 0, 0, 0, 9, 0, 0, 0, 1)
	frame = append(frame, make([]byte, 65537-8)...)
	refused := 0
	for i := 0; i < 300; i++ {
		c, err := net.DialTimeout("tcp", saslAddr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		attackers = append(attackers, c)
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(frame); err != nil {
			refused++
		}
	}
	time.Sleep(attackFor)
	b.halt("half-sent frames")
	t.Logf("%d of 300 attackers' writes failed", refused)
	for _, c := range attackers {
		c.Close()
	}
	attackers = nil
	time.Sleep(200 * time.Millisecond)
	b.answeredAtOnce("half-sent frames")
	checkRSS(t, n, budget, "half-sent frames")
}
