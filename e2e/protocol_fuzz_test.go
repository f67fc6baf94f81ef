package e2e

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/conn"
	"inlet/server"
)

// Protocol fuzzing over TCP: the real server, on its three kinds of connection (gnet's loops,
// a goroutine-per-connection plain listener, a SASL listener), driven with frames built from a
// corpus of valid requests of every API key and version it serves (plus versions it does not),
// mutated: sizes, versions, api keys, correlation ids, flipped bytes, truncation, pipelining
// of up to 100 requests, writes split at random points, and connections closed mid-frame and
// mid-response ("mutate"); and with hostile shapes (protocol_fuzz_shapes_test.go:
// parked long polls with requests behind them, replies never read, half-sent frames,
// oversized names, batches whose headers lie).
//
// It fails on any panic (the test binary dies), any data race (make test runs e2e with
// -race), and on a bystander that is not served: throughout the run a kgo producer on the
// loop listener sends a record every 100 ms (every fifth of 900 KiB), and a fresh connection to each listener asks
// ApiVersions every 250 ms; each must be answered within -protofuzz.live (1 s; 3 s under the
// race detector, which slows the node several times over: the stalls this looks for last
// until the node restarts, a slow answer under -race on 2 cores does not). At the end the
// high watermarks of the lying batches' topic may not pass the records really sent, and the
// node must restart on its data directory (no input may make a start-up fail).
//
// The number of executions is fixed, and each execution draws its shape and content from
// (seed, its index), so a run is reproducible from its seed (printed on failure):
// -protofuzz.execs (make test: 2000; make fuzz: many more), -protofuzz.seed and
// -protofuzz.shapes (all, or some of mutate,park,unread,half,names,batch: make fuzz's
// PROTOFUZZ_SHAPES).
var (
	protoFuzzExecs  = flag.Int("protofuzz.execs", 400, "executions of TestProtocolFuzzOverTCP")
	protoFuzzSeed   = flag.Uint64("protofuzz.seed", 0, "seed of TestProtocolFuzzOverTCP (0: from the clock)")
	protoFuzzShapes = flag.String("protofuzz.shapes", "all", "shapes of TestProtocolFuzzOverTCP: all, or a comma-separated list of mutate,park,unread,half,names,batch")
	protoFuzzLive   = flag.Duration("protofuzz.live", 0, "how soon the bystander's produce and ApiVersions must be answered during TestProtocolFuzzOverTCP (0: 1s, 3s under the race detector)")
)

func TestProtocolFuzzOverTCP(t *testing.T) {
	seed := *protoFuzzSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	shapes, err := parseShapes(*protoFuzzShapes)
	if err != nil {
		t.Fatal(err)
	}
	if *protoFuzzLive == 0 {
		*protoFuzzLive = time.Second
		if raceEnabled {
			*protoFuzzLive = 3 * time.Second
		}
	}
	rerun := fmt.Sprintf("-protofuzz.seed=%d -protofuzz.shapes=%s -protofuzz.execs=%d -protofuzz.live=%v", seed, *protoFuzzShapes, *protoFuzzExecs, *protoFuzzLive)
	t.Logf("seed %d (rerun with %s), %d executions", seed, rerun, *protoFuzzExecs)
	b := startBroker(t, func(c *server.Config) {
		c.Users = testUsers(t)
		c.DefaultPartitions = 2
		c.MaxRequestBytes = 4 << 20
		c.InflightBudget = 16 << 20
		c.FailedAuthenticationDelay = 5 * time.Millisecond
		c.Listeners = []conn.Listener{
			{Name: "loop", Address: "127.0.0.1:0", Protocol: "PLAINTEXT"},
			{Name: "stream", Address: "127.0.0.1:0", Protocol: "PLAINTEXT"},
			{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"},
		}
	})
	b.createTopic("fz", 2) // the corpus's topic (its Produce would create it), named by every shape
	b.createTopic(parkTopic, 1)
	b.createTopic(bigTopic, 1)
	b.createTopic(batchTopic, 2)
	b.createTopic(bystanderTopic, 1)
	addrs := []string{b.srv.ListenerAddr("loop"), b.srv.ListenerAddr("stream"), b.srv.ListenerAddr("sasl")}
	corpus := fuzzCorpus(t)
	t.Logf("corpus: %d served requests, %d of versions not served", len(corpus.served), len(corpus.unserved))

	alive := func(when string) bool {
		t.Helper()
		for i, a := range addrs {
			if err := apiVersionsAnswered(a, 5*time.Second); err != nil {
				b.abandon()
				t.Errorf("%s: %s (listener %s) stopped answering ApiVersions: %v (%s)", when, a, listenerNames[i], err, rerun)
				return false
			}
		}
		return true
	}

	// The seed case: connections pipelining Produce v1 (a version the node does not serve, as
	// librdkafka's protocol fallback sends it) and closing; the node used to dereference a
	// connection gone by then and crash within about 30 connections.
	produceV1 := corpusFrame(t, func() kmsg.Request {
		r := fuzzProduce()
		r.Version = 1
		return r
	}())
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addrs[i%2], 5*time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			var stream []byte
			for range 50 {
				stream = append(stream, produceV1...)
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write(stream)
		}()
	}
	wg.Wait()
	if !alive("after Produce v1 pipelining") {
		return
	}

	const workers = 4
	var (
		mu       sync.Mutex
		done     int
		replied  int64
		byShape  [numShapes]int
		inFlight [numShapes]atomic.Int32
		shared   fuzzShared
	)
	// running names the shapes in flight, for a failure message.
	running := func() string {
		var out []string
		for s := range numShapes {
			if n := inFlight[s].Load(); n > 0 {
				out = append(out, fmt.Sprintf("%s×%d", shapeNames[s], n))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("after %d executions, in flight: %s", done, strings.Join(out, " "))
	}
	by := startBystander(t, addrs, *protoFuzzLive, running)
	execs := make(chan int)
	go func() {
		defer close(execs)
		for i := range *protoFuzzExecs {
			select {
			case execs <- i:
			case <-by.failed: // no more executions once the bystander has failed
				return
			}
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range execs {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				shape := pickShape(rng, shapes)
				inFlight[shape].Add(1)
				n := runShape(shape, rng, addrs[rng.IntN(len(addrs))], corpus, &shared)
				inFlight[shape].Add(-1)
				mu.Lock()
				done++
				byShape[shape]++
				replied += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	failure := by.stop()
	var counts []string
	for s, n := range byShape {
		if n > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", shapeNames[s], n))
		}
	}
	t.Logf("%d executions (%s), %d bytes of replies read; bystander: %s", done, strings.Join(counts, ", "), replied, by.summary())
	if failure != "" {
		t.Errorf("the bystander was not served: %s (%s)", failure, rerun)
	}
	if !alive("at the end") {
		t.Errorf("the node is still wedged after every fuzzing connection closed")
		return
	}
	var hw int64
	for p := range int32(2) {
		hw += b.highWatermark(batchTopic, p)
	}
	if sent := shared.batchRecords.Load(); hw > sent {
		t.Errorf("batches whose headers lie were trusted: %s's high watermarks add up to %d, for %d records sent (%s)", batchTopic, hw, sent, rerun)
	}
	// A clean stop and a start on the same directory: what the names stored must load.
	b.stop()
	if err := b.tryStart(); err != nil {
		msg := err.Error()
		if len(msg) > 400 { // a key of tens of KiB, in hex
			msg = msg[:400] + fmt.Sprintf("... (%d bytes)", len(msg))
		}
		t.Errorf("the node does not start again on its data directory after the fuzzing: %s (%s)", msg, rerun)
		return
	}
	addrs = []string{b.srv.ListenerAddr("loop"), b.srv.ListenerAddr("stream"), b.srv.ListenerAddr("sasl")}
	alive("after a restart")
}

// fuzzOnce runs one execution: a connection, a stream of mutated frames written in pieces, and
// an ending (read the replies for a while, close at once, or close in the middle of a frame).
func fuzzOnce(rng *rand.Rand, addr string, corpus protoCorpus) (replied int64) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return // refused under load: not a failure by itself (liveness is checked apart)
	}
	defer c.Close()
	var stream []byte
	rate := []float64{0, 0.01, 0.05, 0.3}[rng.IntN(4)] // of frames mutated
	for range 1 + rng.IntN(100) {
		from := corpus.served
		if rng.IntN(50) == 0 { // a version not served closes the connection: rarely
			from = corpus.unserved
		}
		f := append([]byte(nil), from[rng.IntN(len(from))]...)
		if rng.Float64() < rate {
			f = mutateFrame(rng, f)
		}
		stream = append(stream, f...)
	}
	ending := rng.IntN(4)
	if ending == 0 && len(stream) > 1 {
		stream = stream[:1+rng.IntN(len(stream)-1)] // closed mid-frame
	}
	// Replies are read concurrently so a node writing to a client that reads is never stuck
	// on a full socket; ending 1 closes without reading (mid-response).
	readFor := time.Duration(50+rng.IntN(250)) * time.Millisecond
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		if ending == 1 {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(readFor))
		replied, _ = io.Copy(io.Discard, c)
	}()
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for len(stream) > 0 {
		n := min(len(stream), 1+rng.IntN(8192))
		if _, err := c.Write(stream[:n]); err != nil {
			break
		}
		stream = stream[n:]
	}
	if ending == 1 {
		c.Close()
	}
	<-readDone
	return replied
}

// mutateFrame changes one framed request (4-byte size, header, body) in one or more ways.
func mutateFrame(rng *rand.Rand, f []byte) []byte {
	for range 1 + rng.IntN(3) {
		switch rng.IntN(9) {
		case 0: // the size prefix: anything, from negative to huge
			sizes := []int32{-1, 0, 1, 7, 8, int32(len(f) - 4 - 1), int32(len(f) - 4 + 1), 512<<10 + 1, 4<<20 + 1, 1 << 30, rng.Int32()}
			binary.BigEndian.PutUint32(f, uint32(sizes[rng.IntN(len(sizes))]))
		case 1: // the version
			if len(f) >= 8 {
				binary.BigEndian.PutUint16(f[6:], uint16(rng.IntN(40)-4))
			}
		case 2: // the api key
			if len(f) >= 6 {
				binary.BigEndian.PutUint16(f[4:], uint16(rng.IntN(80)-4))
			}
		case 3: // the correlation id
			if len(f) >= 12 {
				binary.BigEndian.PutUint32(f[8:], rng.Uint32())
			}
		case 4, 5: // flipped bytes in the header or body
			for range 1 + rng.IntN(8) {
				if len(f) > 4 {
					f[4+rng.IntN(len(f)-4)] ^= byte(1 + rng.IntN(255))
				}
			}
		case 6: // truncated, with the size prefix saying so
			if len(f) > 5 {
				f = f[:4+rng.IntN(len(f)-4)]
				binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			}
		case 7: // garbage appended inside the frame
			extra := make([]byte, rng.IntN(64))
			for i := range extra {
				extra[i] = byte(rng.Uint32())
			}
			f = append(f, extra...)
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
		case 8: // a string or array length inside the body set to something large or negative
			if len(f) > 16 {
				i := 12 + rng.IntN(len(f)-14)
				binary.BigEndian.PutUint16(f[i:], uint16(rng.IntN(3)*0x7fff+rng.IntN(2)))
			}
		}
	}
	return f
}

// protoCorpus is framed requests: served holds one valid request of every API key and version
// the node serves, unserved the versions one beyond each end of each range.
type protoCorpus struct{ served, unserved [][]byte }

func fuzzCorpus(t *testing.T) protoCorpus {
	var out protoCorpus
	for _, k := range server.SupportedAPIs() {
		for v := k.MinVersion - 1; v <= k.MaxVersion+1; v++ {
			if v < 0 {
				continue
			}
			req := kmsg.RequestForKey(k.ApiKey)
			if req == nil || v > req.MaxVersion() {
				continue
			}
			fillFuzzRequest(req)
			req.SetVersion(v)
			f := corpusFrame(t, req)
			switch {
			case f == nil:
			case v < k.MinVersion || v > k.MaxVersion:
				out.unserved = append(out.unserved, f)
			default:
				out.served = append(out.served, f)
			}
		}
	}
	return out
}

// corpusFrame frames req, or returns nil if kmsg cannot encode it at its version.
func corpusFrame(t *testing.T, req kmsg.Request) (f []byte) {
	defer func() {
		if recover() != nil {
			f = nil
		}
	}()
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz")).AppendRequest(nil, req, 7)
}

func fuzzProduce() *kmsg.ProduceRequest {
	return produceReq(9, -1, "fz", 0, plainBatch(3, 1000, "fz").encode())
}

// fillFuzzRequest gives the requests whose empty form would be answered trivially the
// fields that take the node down its real paths: topics, partitions, groups, SASL steps.
func fillFuzzRequest(req kmsg.Request) {
	topic := "fz"
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		*r = *fuzzProduce()
	case *kmsg.FetchRequest:
		r.MaxWaitMillis, r.MinBytes, r.MaxBytes = 50, 1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		r.Topics = append(r.Topics, ft)
	case *kmsg.ListOffsetsRequest:
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		r.Topics = append(r.Topics, lt)
	case *kmsg.MetadataRequest:
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		r.Topics = append(r.Topics, mt)
		r.AllowAutoTopicCreation = true
	case *kmsg.CreateTopicsRequest:
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fz-created", 2, 1
		r.Topics = append(r.Topics, ct)
	case *kmsg.CreatePartitionsRequest:
		cp := kmsg.NewCreatePartitionsRequestTopic()
		cp.Topic, cp.Count = topic, 3
		r.Topics = append(r.Topics, cp)
	case *kmsg.DeleteRecordsRequest:
		dt := kmsg.NewDeleteRecordsRequestTopic()
		dt.Topic = topic
		dp := kmsg.NewDeleteRecordsRequestTopicPartition()
		dp.Offset = 1
		dt.Partitions = append(dt.Partitions, dp)
		r.Topics = append(r.Topics, dt)
	case *kmsg.OffsetCommitRequest:
		r.Group, r.Generation = "fzg", -1
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = topic
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Offset = 1
		ot.Partitions = append(ot.Partitions, op)
		r.Topics = append(r.Topics, ot)
	case *kmsg.OffsetFetchRequest:
		r.Group = "fzg"
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKey = "fzg"
		r.CoordinatorKeys = []string{"fzg"}
	case *kmsg.JoinGroupRequest:
		r.Group, r.ProtocolType = "fzg", "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 6000, 1000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 1}
		r.Protocols = append(r.Protocols, p)
	case *kmsg.HeartbeatRequest:
		r.Group, r.MemberID = "fzg", "m"
	case *kmsg.SyncGroupRequest:
		r.Group, r.MemberID = "fzg", "m"
	case *kmsg.LeaveGroupRequest:
		r.Group, r.MemberID = "fzg", "m"
	case *kmsg.DescribeGroupsRequest:
		r.Groups = []string{"fzg"}
	case *kmsg.DeleteGroupsRequest:
		r.Groups = []string{"fzg-other"}
	case *kmsg.SASLHandshakeRequest:
		r.Mechanism = "PLAIN"
	case *kmsg.SASLAuthenticateRequest:
		r.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	case *kmsg.InitProducerIDRequest:
		r.TransactionTimeoutMillis = 60000
	case *kmsg.DescribeConfigsRequest:
		rc := kmsg.NewDescribeConfigsRequestResource()
		rc.ResourceType, rc.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		r.Resources = append(r.Resources, rc)
	case *kmsg.ApiVersionsRequest:
		r.ClientSoftwareName, r.ClientSoftwareVersion = "fuzz", "1"
	case *kmsg.ConsumerGroupHeartbeatRequest: // a KIP-848 join (consumer_group_848_bounds_test.go)
		r.Group, r.MemberID, r.RebalanceTimeoutMillis = "fzg-848", "fz-member", 1000
		r.SubscribedTopicNames, r.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case *kmsg.ConsumerGroupDescribeRequest:
		r.Groups, r.IncludeAuthorizedOperations = []string{"fzg-848"}, true
	case *kmsg.OffsetForLeaderEpochRequest:
		ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
		ot.Topic = topic
		ot.Partitions = append(ot.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
		r.Topics = append(r.Topics, ot)
	}
}

// apiVersionsAnswered opens a connection to addr and checks that ApiVersions v0 is answered
// within timeout.
func apiVersionsAnswered(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz-alive")).AppendRequest(nil, req, 42)
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(f); err != nil {
		return err
	}
	var hdr [10]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	if corr := binary.BigEndian.Uint32(hdr[4:]); corr != 42 {
		return fmt.Errorf("correlation id %d", corr)
	}
	if code := binary.BigEndian.Uint16(hdr[8:]); code != 0 {
		return fmt.Errorf("error %d", code)
	}
	return nil
}
