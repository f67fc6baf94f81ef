package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// The hostile shapes of the protocol fuzzer, beside "mutate" (fuzzOnce: mutated
// pipelines of the corpus). Each is one execution, driven by its own seeded generator, so an
// execution is reproduced from the seed and its index; each is bounded in time (a few seconds
// at most) and closes every connection it opens.
//
//	park    Fetch long polls parked at the high watermark (MaxWait and MinBytes 2^31-1 on a
//	        partition nothing is written to), with requests pipelined behind them (Produce
//	        frames of up to 3.5 MiB, small requests), held open, then closed
//	unread  a connection that pipelines requests (ApiVersions v0, Metadata, Fetch from the
//	        start) and never reads a reply, writing until the node stops reading or 1 MiB
//	half    up to 64 connections that each send a length prefix and part of the frame, then
//	        stall (some send a byte now and then), then close
//	names   group ids, transactional ids and client ids of tens of KiB, in the APIs that carry
//	        them (a client id is an int16 string: at most 32,767 bytes)
//	batch   CRC-valid record batches whose headers lie: record count, last offset delta, batch
//	        length, at the real count plus or minus a little and near 2^31
const (
	shapeMutate = iota
	shapePark
	shapeUnread
	shapeHalf
	shapeLongNames
	shapeBatch
	numShapes
)

var shapeNames = [numShapes]string{"mutate", "park", "unread", "half", "names", "batch"}

// shapeWeights: how often each shape is drawn when several are selected. The corpus mutations
// stay the bulk of the executions (and the cheap ones); each hostile shape holds connections
// for up to a second or two.
var shapeWeights = [numShapes]int{shapeMutate: 24, shapePark: 1, shapeUnread: 1, shapeHalf: 1, shapeLongNames: 2, shapeBatch: 2}

// Topics the shapes use: fzpark is never written (so offset 0 is its high watermark), fzbig
// receives only oversized records (refused: MESSAGE_TOO_LARGE), fzb the lying batches.
const (
	parkTopic  = "fzpark"
	bigTopic   = "fzbig"
	batchTopic = "fzb"
)

// parseShapes reads -protofuzz.shapes: "all" or a comma-separated list of shape names.
func parseShapes(s string) ([]int, error) {
	if s == "" || s == "all" {
		out := make([]int, numShapes)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	var out []int
	for _, name := range strings.Split(s, ",") {
		found := false
		for i, n := range shapeNames {
			if strings.TrimSpace(name) == n {
				out, found = append(out, i), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown shape %q (shapes: %s, or all)", name, strings.Join(shapeNames[:], ","))
		}
	}
	return out, nil
}

// pickShape draws one of the selected shapes by weight.
func pickShape(rng *rand.Rand, selected []int) int {
	total := 0
	for _, s := range selected {
		total += shapeWeights[s]
	}
	n := rng.IntN(total)
	for _, s := range selected {
		if n -= shapeWeights[s]; n < 0 {
			return s
		}
	}
	return selected[len(selected)-1]
}

// fuzzShared is what the executions report to the test: the real records sent in lying
// batches (the high watermark of batchTopic may not pass it).
type fuzzShared struct {
	batchRecords atomic.Int64
}

// runShape runs one execution of shape s on addr and returns the bytes of replies it read.
func runShape(s int, rng *rand.Rand, addr string, corpus protoCorpus, sh *fuzzShared) int64 {
	switch s {
	case shapePark:
		return fuzzPark(rng, addr)
	case shapeUnread:
		fuzzUnread(rng, addr)
		return 0
	case shapeHalf:
		fuzzHalf(rng, addr)
		return 0
	case shapeLongNames:
		return fuzzNames(rng, addr)
	case shapeBatch:
		return fuzzBatch(rng, addr, sh)
	default:
		return fuzzOnce(rng, addr, corpus)
	}
}

// servedVersion is a random version of key among those the node serves.
func servedVersion(rng *rand.Rand, key int16) int16 {
	for _, k := range server.SupportedAPIs() {
		if k.ApiKey == key {
			return k.MinVersion + int16(rng.IntN(int(k.MaxVersion-k.MinVersion)+1))
		}
	}
	panic(fmt.Sprintf("BUG: api key %d is not served", key))
}

// servedMax is the newest version of key the node serves.
func servedMax(key int16) int16 {
	for _, k := range server.SupportedAPIs() {
		if k.ApiKey == key {
			return k.MaxVersion
		}
	}
	panic(fmt.Sprintf("BUG: api key %d is not served", key))
}

// frameReq frames req with client id cid, or returns nil if kmsg cannot encode it.
func frameReq(req kmsg.Request, cid string, corr int32) (f []byte) {
	defer func() {
		if recover() != nil {
			f = nil
		}
	}()
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID(cid)).AppendRequest(nil, req, corr)
}

// drain reads and discards what the node sends on c for d, counting it.
func drain(c net.Conn, d time.Duration) int64 {
	_ = c.SetReadDeadline(time.Now().Add(d))
	n, _ := io.Copy(io.Discard, c)
	return n
}

// writeAll writes b to c in pieces, within d; it stops at the first error.
func writeAll(rng *rand.Rand, c net.Conn, b []byte, d time.Duration) {
	_ = c.SetWriteDeadline(time.Now().Add(d))
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(256<<10))
		if _, err := c.Write(b[:n]); err != nil {
			return
		}
		b = b[n:]
	}
}

// bigProduce is a Produce frame of about size bytes: one record with a value of that size, to
// bigTopic (refused as too large, but its bytes are read and held until it is answered).
func bigProduce(rng *rand.Rand, size int, corr int32) []byte {
	s := plainBatch(1, 1000, "big")
	s.records[0].value = make([]byte, size)
	return frameReq(produceReq(servedVersion(rng, 0), -1, bigTopic, 0, s.encode()), "fuzz-park", corr)
}

func fuzzPark(rng *rand.Rand, addr string) (replied int64) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	var stream []byte
	for i := range 1 + rng.IntN(3) { // one to three parked fetches
		f := fetchReq(servedVersion(rng, 1), parkTopic, 0, 0, math.MaxInt32, math.MaxInt32, math.MaxInt32, 1<<20)
		stream = append(stream, frameReq(f, "fuzz-park", int32(i))...)
	}
	for i := range 1 + rng.IntN(4) { // and behind them, requests that wait for them
		switch rng.IntN(4) {
		case 0, 1:
			stream = append(stream, bigProduce(rng, 1<<20+rng.IntN(5<<19), int32(100+i))...)
		case 2:
			stream = append(stream, frameReq(kmsg.NewPtrApiVersionsRequest(), "fuzz-park", int32(100+i))...)
		default:
			m := kmsg.NewPtrMetadataRequest()
			m.Version = servedVersion(rng, 3)
			stream = append(stream, frameReq(m, "fuzz-park", int32(100+i))...)
		}
	}
	writeAll(rng, c, stream, 2*time.Second)
	hold := time.Duration(100+rng.IntN(900)) * time.Millisecond
	if rng.IntN(2) == 0 {
		return drain(c, hold)
	}
	time.Sleep(hold)
	return 0
}

func fuzzUnread(rng *rand.Rand, addr string) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	var unit []byte
	switch rng.IntN(3) {
	case 0: // ApiVersions v0, 14 bytes, answered with a few hundred
		unit = frameReq(kmsg.NewPtrApiVersionsRequest(), "", 1)
	case 1:
		m := kmsg.NewPtrMetadataRequest()
		m.Version = servedVersion(rng, 3)
		unit = frameReq(m, "fuzz-unread", 1)
	default: // Fetch from the start of fz: replies as large as the topic, up to 1 MiB
		unit = frameReq(fetchReq(servedVersion(rng, 1), "fz", 0, 0, 0, 1, 1<<20, 1<<20), "fuzz-unread", 1)
	}
	limit := 64<<10 + rng.IntN(1<<20)
	var stream []byte
	for len(stream) < limit {
		stream = append(stream, unit...)
	}
	// Until the node stops reading (the socket buffers fill) or everything is written.
	writeAll(rng, c, stream, time.Duration(500+rng.IntN(1000))*time.Millisecond)
	time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
}

func fuzzHalf(rng *rand.Rand, addr string) {
	n := 1 + rng.IntN(64)
	declared := []int{65537, 256 << 10, 512 << 10, 1 << 20, 4<<20 - 64}[rng.IntN(5)]
	// 65,537 bytes: one past the first 64 KiB buffer, so the frame is charged its next size.
	send := []int{0, 12, 65536, 65537, 65537, rng.IntN(65538)}[rng.IntN(6)]
	dribble := rng.IntN(2) == 0
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
		f := make([]byte, 4+send)
		binary.BigEndian.PutUint32(f, uint32(declared))
		// The start of a real header (Produce v9), then filler, so the frame could be real.
		if send >= 8 {
			binary.BigEndian.PutUint16(f[4:], 0)
			binary.BigEndian.PutUint16(f[6:], 9)
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(f); err != nil {
			break
		}
	}
	hold := time.Duration(200+rng.IntN(800)) * time.Millisecond
	for end := time.Now().Add(hold); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		if !dribble {
			continue
		}
		for _, c := range conns {
			_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			_, _ = c.Write([]byte{0})
		}
	}
}

// longName is a name of n bytes, distinct per call.
func longName(rng *rand.Rand, prefix string, n int) string {
	b := []byte(strings.Repeat("n", n))
	copy(b, fmt.Sprintf("%s-%x-", prefix, rng.Uint32()))
	return string(b)
}

func fuzzNames(rng *rand.Rand, addr string) (replied int64) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	size := func() int { return []int{250, 256, 20 << 10, 32767, 40 << 10, 70000}[rng.IntN(6)] }
	// version is a served version of key; a name past an int16 string's 32,767 bytes fits only
	// a flexible version's compact string, so mostly the newest.
	version := func(key int16) int16 {
		if rng.IntN(4) > 0 {
			return servedMax(key)
		}
		return servedVersion(rng, key)
	}
	cid := "fuzz-names"
	if rng.IntN(3) == 0 {
		cid = longName(rng, "cid", []int{16 << 10, 32767}[rng.IntN(2)])
	}
	var stream []byte
	for i := range 1 + rng.IntN(4) {
		var req kmsg.Request
		switch rng.IntN(7) {
		case 0:
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Version = version(8)
			r.Group, r.Generation = longName(rng, "g", size()), -1
			ot := kmsg.NewOffsetCommitRequestTopic()
			ot.Topic = "fz"
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Offset = 1
			ot.Partitions = append(ot.Partitions, op)
			r.Topics = append(r.Topics, ot)
			req = r
		case 1:
			r := kmsg.NewPtrJoinGroupRequest()
			r.Version = version(11)
			r.Group, r.ProtocolType = longName(rng, "g", size()), "consumer"
			r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 6000, 1000
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = "range", []byte{0, 1}
			r.Protocols = append(r.Protocols, p)
			req = r
		case 2:
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.Version = version(10)
			r.CoordinatorKey = longName(rng, "g", size())
			r.CoordinatorKeys = []string{r.CoordinatorKey}
			req = r
		case 3:
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Version = version(15)
			r.Groups = []string{longName(rng, "g", size())}
			req = r
		case 4:
			r := kmsg.NewPtrInitProducerIDRequest()
			r.Version = version(22)
			r.TransactionalID = kmsg.StringPtr(longName(rng, "tx", size()))
			r.TransactionTimeoutMillis = 60000
			req = r
		case 5:
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.Version = version(24)
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = longName(rng, "tx", size()), 1, 0
			at := kmsg.NewAddPartitionsToTxnRequestTopic()
			at.Topic, at.Partitions = "fz", []int32{0}
			r.Topics = append(r.Topics, at)
			req = r
		default:
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version = version(9)
			r.Group = longName(rng, "g", size())
			g := kmsg.NewOffsetFetchRequestGroup() // v8+: groups
			g.Group = r.Group
			r.Groups = append(r.Groups, g)
			req = r
		}
		stream = append(stream, frameReq(req, cid, int32(i))...)
	}
	writeAll(rng, c, stream, 2*time.Second)
	return drain(c, time.Duration(50+rng.IntN(250))*time.Millisecond)
}

func fuzzBatch(rng *rand.Rand, addr string, sh *fuzzShared) (replied int64) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	var stream []byte
	for i := range 1 + rng.IntN(4) {
		n := 1 + rng.IntN(5)
		b := plainBatch(n, 1000, "lie").encode()
		lies := []int64{0, int64(n) - 1, int64(n) + 1, 2_000_000_000, math.MaxInt32, -1}
		switch rng.IntN(4) {
		case 0: // the record count
			binary.BigEndian.PutUint32(b[offNumRecords:], uint32(lies[rng.IntN(len(lies))]))
		case 1: // the last offset delta
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lies[rng.IntN(len(lies))]))
		case 2: // both, agreeing with each other (2,000,000,000 records claimed for one)
			l := lies[rng.IntN(len(lies))]
			binary.BigEndian.PutUint32(b[offNumRecords:], uint32(l))
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(l-1))
		default: // the batch length, shorter than the records or with bytes after them
			if rng.IntN(2) == 0 {
				binary.BigEndian.PutUint32(b[offLength:], uint32(int(binary.BigEndian.Uint32(b[offLength:]))-1-rng.IntN(8)))
			} else {
				b = append(b, make([]byte, 1+rng.IntN(16))...)
				binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-12))
			}
		}
		fixCRC(b)
		sh.batchRecords.Add(int64(n))
		stream = append(stream, frameReq(produceReq(servedVersion(rng, 0), -1, batchTopic, int32(rng.IntN(2)), b), "fuzz-batch", int32(i))...)
	}
	writeAll(rng, c, stream, 2*time.Second)
	return drain(c, time.Duration(50+rng.IntN(250))*time.Millisecond)
}

// listenerNames are the fuzzed node's listeners, in the order of the test's addrs.
var listenerNames = []string{"loop", "stream", "sasl"}

// bystanderTopic is the bystander producer's.
const bystanderTopic = "bystander"

// bystander is a legitimate client beside the fuzzer: a kgo producer on the loop listener
// sending one record every 100 ms (every fifth of 900 KiB) and waiting for its
// acknowledgement, and a fresh connection
// to each listener asking ApiVersions every 250 ms. Each must be answered within live; the
// first that is not is the failure (with the shapes in flight at the time), and it stops.
type bystander struct {
	live    time.Duration
	running func() string // the shapes in flight, for the failure message
	quit    chan struct{}
	wg      sync.WaitGroup

	failOnce sync.Once
	failed   chan struct{} // closed with failure set
	failure  string

	mu       sync.Mutex
	produced []time.Duration // each acknowledgement's latency
	probed   []time.Duration // each ApiVersions' latency
}

func startBystander(t *testing.T, addrs []string, live time.Duration, running func() string) *bystander {
	t.Helper()
	by := &bystander{live: live, running: running, quit: make(chan struct{}), failed: make(chan struct{})}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ClientID("bystander"), kgo.RecordRetries(math.MaxInt32))
	if err != nil {
		t.Fatal(err)
	}
	// The first record also fetches metadata and a producer id: not part of what is measured.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: bystanderTopic, Value: []byte("warm-up")}).FirstErr(); err != nil {
		cl.Close()
		t.Fatalf("the bystander producer's first record: %v", err)
	}
	by.wg.Add(1 + len(addrs))
	go func() {
		defer by.wg.Done()
		wedged := false
		defer func() {
			if wedged {
				go cl.Close() // it may wait for the node: not on the test's way out
			} else {
				cl.Close()
			}
		}()
		for i := 0; ; i++ {
			select {
			case <-by.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
			began := time.Now()
			acked := make(chan error, 1)
			value := fmt.Appendf(nil, "bystander-%d", i)
			if i%5 == 4 { // a request that arrives over several reads, as a real producer's do
				value = append(value, make([]byte, 900<<10)...)
			}
			cl.Produce(context.Background(), &kgo.Record{Topic: bystanderTopic, Value: value}, func(_ *kgo.Record, err error) { acked <- err })
			var err error
			select {
			case err = <-acked:
			case <-time.After(6 * live): // past live it has failed; 5×live more tells a slow node from a wedged one
				wedged = true
				err = fmt.Errorf("no acknowledgement")
			}
			took := time.Since(began)
			by.mu.Lock()
			by.produced = append(by.produced, took)
			by.mu.Unlock()
			switch {
			case err != nil:
				by.fail(fmt.Sprintf("the bystander producer's record %d: %v after %v", i, err, took.Round(time.Millisecond)))
				return
			case took > live:
				by.fail(fmt.Sprintf("the bystander producer's record %d was acknowledged after %v", i, took.Round(time.Millisecond)))
				return
			}
		}
	}()
	for i, a := range addrs {
		go func() {
			defer by.wg.Done()
			for {
				select {
				case <-by.quit:
					return
				case <-time.After(250 * time.Millisecond):
				}
				began := time.Now()
				err := apiVersionsAnswered(a, live)
				took := time.Since(began)
				by.mu.Lock()
				by.probed = append(by.probed, took)
				by.mu.Unlock()
				if err == nil && took > live {
					err = fmt.Errorf("answered after %v", took.Round(time.Millisecond))
				}
				if err != nil {
					by.fail(fmt.Sprintf("a fresh ApiVersions on %s (listener %s): %v", a, listenerNames[i], err))
					return
				}
			}
		}()
	}
	return by
}

func (by *bystander) fail(why string) {
	by.failOnce.Do(func() {
		by.failure = why + "; " + by.running()
		close(by.failed)
	})
}

// stop ends the bystander and returns its failure ("" if it was served throughout).
func (by *bystander) stop() string {
	close(by.quit)
	by.wg.Wait()
	select {
	case <-by.failed:
		return by.failure
	default:
		return ""
	}
}

// summary is the bystander's latencies: count, p99 and max of each kind.
func (by *bystander) summary() string {
	by.mu.Lock()
	defer by.mu.Unlock()
	q := func(d []time.Duration) string {
		if len(d) == 0 {
			return "none"
		}
		s := slices.Clone(d)
		slices.Sort(s)
		return fmt.Sprintf("%d, p99 %v, max %v", len(s), s[len(s)*99/100].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
	}
	return fmt.Sprintf("produce %s; ApiVersions %s", q(by.produced), q(by.probed))
}
