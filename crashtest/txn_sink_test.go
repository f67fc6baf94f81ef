package crashtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/segfs"
	"inlet/server"
)

// A sink shaped like a transactional Kafka sink (Materialize's, Kafka Connect's exactly-once
// tasks): each transaction writes a run of numbered data records to a data topic and one
// progress record (the next number) to a one-partition compacted progress topic. After any
// failure the sink starts over as a new process would: a new client with the same
// transactional id (whose InitProducerId fences the old one and aborts its open
// transaction), its position read back from the progress topic with read_committed. At the
// end a read_committed reader must find every number below the final position exactly once
// in the data topic, and nothing else.

const (
	sinkDataTopic     = "sink-data"
	sinkProgressTopic = "sink-progress"
	sinkTxnID         = "sink-1"
	sinkPartitions    = 4
)

// sinkNode is the broker under the sink: crash stops it the way the test means (SIGKILL,
// power loss) and brings it back on the same address.
type sinkNode interface {
	addr() string
	crash(t *testing.T)
}

// sink is the sink's loop; run returns the committed position once it reaches target.
type sink struct {
	t      *testing.T
	node   sinkNode
	perTxn int
	rng    *rand.Rand
	// abandon is the chance that the sink "dies" in a transaction: it drops its client
	// without ending the transaction, as a killed process would.
	abandon                     float64
	restarts, committed, failed int
}

func (s *sink) newClient() (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(s.node.addr()),
		kgo.TransactionalID(sinkTxnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.RequestTimeoutOverhead(2*time.Second),
	)
}

// position reads the last committed progress record with read_committed: 0 if none.
func (s *sink) position(ctx context.Context) (int64, error) {
	values, err := readCommitted(ctx, s.node.addr(), sinkProgressTopic, 1)
	if err != nil {
		return 0, err
	}
	if len(values) == 0 {
		return 0, nil
	}
	return values[len(values)-1], nil
}

func (s *sink) run(ctx context.Context, target int64) (int64, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		next, err := s.position(ctx)
		if err != nil {
			s.t.Logf("sink: reading the position: %v (retrying)", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if next >= target {
			return next, nil
		}
		cl, err := s.newClient()
		if err != nil {
			return 0, err
		}
		s.restarts++
		next, err = s.transactions(ctx, cl, next, target)
		cl.Close()
		if err == nil {
			return next, nil
		}
		s.t.Logf("sink: restarting after: %v", err)
	}
}

var errAbandoned = errors.New("the sink died in a transaction")

// transactions runs transactions from next until target or the first failure.
func (s *sink) transactions(ctx context.Context, cl *kgo.Client, next, target int64) (int64, error) {
	for next < target {
		if err := cl.BeginTransaction(); err != nil {
			return next, err
		}
		end := min(next+int64(s.perTxn), target)
		for n := next; n < end; n++ {
			r := &kgo.Record{Topic: sinkDataTopic, Partition: int32(n % sinkPartitions), Key: []byte(strconv.FormatInt(n, 10)), Value: binary.BigEndian.AppendUint64(nil, uint64(n))}
			cl.Produce(ctx, r, nil)
		}
		cl.Produce(ctx, &kgo.Record{Topic: sinkProgressTopic, Partition: 0, Key: []byte("position"), Value: binary.BigEndian.AppendUint64(nil, uint64(end))}, nil)
		if s.rng.Float64() < s.abandon {
			_ = cl.Flush(ctx)
			return next, errAbandoned
		}
		flushErr := cl.Flush(ctx)
		commit := kgo.TryCommit
		if flushErr != nil {
			commit = kgo.TryAbort
		}
		ectx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := cl.EndTransaction(ectx, commit)
		cancel()
		switch {
		case err != nil:
			s.failed++
			return next, fmt.Errorf("end transaction: %w", err)
		case flushErr != nil:
			s.failed++
			return next, fmt.Errorf("flush: %w", flushErr)
		}
		s.committed++
		next = end
	}
	return next, nil
}

// readCommitted reads every record of topic with read_committed, in offset order per
// partition, as the big-endian numbers the sink writes, until the committed end offsets
// (ListOffsets with read_committed: the last stable offsets) are reached.
func readCommitted(ctx context.Context, addr, topic string, partitions int) ([]int64, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(adm).ListCommittedOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	assign := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	for p := int32(0); p < int32(partitions); p++ {
		o, ok := ends.Lookup(topic, p)
		if !ok {
			return nil, fmt.Errorf("no end offset for %s/%d", topic, p)
		}
		if o.Offset > 0 {
			assign[p] = kgo.NewOffset().AtStart()
			left[p] = o.Offset
		}
	}
	if len(assign) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []int64
	// A partition is done when a fetch shows its position at or past its end: the records
	// and markers before it are all consumed (the last offsets may be markers, never
	// returned as records, so the fetch position says it, not the last record).
	for len(left) > 0 {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, int64(binary.BigEndian.Uint64(r.Value)))
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
		})
		if fs.Empty() {
			// Nothing new within the poll: what remains below the ends is markers and
			// aborted records.
			break
		}
	}
	return out, nil
}

// minSinkCrashes is how many times runSink crashes the node at the least: a sink that
// reaches its target before that goes on, a target further each time, so that a fast sink
// (the power-loss node runs on memory) still meets crashes.
const minSinkCrashes = 3

// runSink drives the sink to target, and on past it until the node has crashed
// minSinkCrashes times, while crash hits the node every crashEvery on average; then it
// checks the data topic.
func runSink(t *testing.T, node sinkNode, seed uint64, target int64, crashEvery time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, seed))
	s := &sink{t: t, node: node, perTxn: 200, rng: rand.New(rand.NewPCG(seed, 1)), abandon: 0.05}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var crashes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			d := time.Duration(float64(crashEvery) * (0.5 + rng.Float64()))
			select {
			case <-stop:
				return
			case <-time.After(d):
			}
			node.crash(t)
			crashes.Add(1)
		}
	}()
	var final int64
	var err error
	for goal := target; ; goal += target {
		if final, err = s.run(ctx, goal); err != nil || crashes.Load() >= minSinkCrashes {
			break
		}
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("sink: %v", err)
	}
	t.Logf("sink: position %d after %d transactions committed, %d failed, %d starts; %d crashes of the node", final, s.committed, s.failed, s.restarts, crashes.Load())
	if crashes.Load() < minSinkCrashes {
		t.Fatalf("the node crashed %d times, fewer than %d: the test proved too little", crashes.Load(), minSinkCrashes)
	}
	values, err := readCommitted(ctx, node.addr(), sinkDataTopic, sinkPartitions)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, final)
	for _, v := range values {
		if v < 0 || v >= final {
			t.Fatalf("record %d in the data topic, past the committed position %d (aborted or uncommitted data is visible)", v, final)
		}
		seen[v]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %d seen %d times in the data topic (want exactly once); %d records read", v, n, len(values))
		}
	}
}

// killedInlet is an inlet process that crash SIGKILLs and restarts.
type killedInlet struct{ n *inlet }

func (k killedInlet) addr() string { return k.n.addr() }
func (k killedInlet) crash(t *testing.T) {
	k.n.kill()
	time.Sleep(killPause)
	k.n.restart()
}

// TestTransactionalSinkSurvivesKills: the sink reaches its target with Inlet SIGKILLed and
// restarted every couple of seconds and the sink itself dying in some transactions; the data
// topic then holds every committed record exactly once and nothing else.
func TestTransactionalSinkSurvivesKills(t *testing.T) {
	n := startInlet(t, "--storage", "segments", "--segment-bytes", "8MiB")
	createSinkTopics(t, n.addr())
	runSink(t, killedInlet{n}, uint64(time.Now().UnixNano()), 24_000, 1500*time.Millisecond)
}

func createSinkTopics(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, sinkPartitions, 1, nil, sinkDataTopic); err != nil {
		t.Fatal(err)
	}
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, sinkProgressTopic); err != nil {
		t.Fatal(err)
	}
}

// powerLossNode is an in-process node whose segment files and Pebble live on crashable
// in-memory file systems: crash keeps only what was synced (the last unsynced write of each
// file possibly torn), drops the old node and starts a new one on what survived, on the same
// address. Clients reach it through a proxy that crash cuts first, so that no reply the old
// node sends after the cut (its drain answers what it has read) reaches them: a client is told
// of no write that the new node may not hold.
type powerLossNode struct {
	t      *testing.T
	proxy  *cutProxy
	listen string
	rng    *rand.Rand
	segFS  *segfs.MemFS
	pebFS  *vfs.MemFS
	blog   *batchlog.Log
	srv    *server.Server
}

func (p *powerLossNode) addr() string { return p.proxy.addr() }

func (p *powerLossNode) start(t *testing.T) {
	t.Helper()
	var err error
	for range 50 {
		cat, err := meta.Open(meta.Options{Dir: "/data", FS: p.pebFS, Logger: quietLogger()})
		if err != nil {
			t.Fatalf("open the catalog after a power loss: %v", err)
		}
		p.srv, err = server.New(server.Config{Listen: p.listen, Advertise: p.proxy.addr(), DefaultPartitions: 1, Workers: 2,
			Logger: quietLogger(), GroupInitialRebalanceDelay: -1}, cat)
		if err != nil {
			t.Fatalf("load the coordinators after a power loss: %v", err)
		}
		p.blog, err = batchlog.Open(batchlog.Options{Dir: "/data", SegmentFS: p.segFS, PebbleFS: p.pebFS,
			SegmentBytes: 1 << 20, Logger: quietLogger(), Meta: cat, Txns: p.srv.Txns()})
		if err != nil {
			t.Fatalf("open the log after a power loss: %v", err)
		}
		if err = p.srv.Start(p.blog, nil); err == nil {
			if strings.HasSuffix(p.listen, ":0") {
				p.listen = p.srv.Addr() // the first start, before the sink and the crashes
			}
			p.proxy.setTarget(p.listen)
			return
		}
		p.blog.Close()
		time.Sleep(100 * time.Millisecond) // the old listener's port may linger
	}
	t.Fatalf("start: %v", err)
}

func (p *powerLossNode) crash(t *testing.T) {
	var pebCrashed *vfs.MemFS
	mode, name := segfs.SyncedOnly, "synced data only"
	if p.rng.IntN(2) == 0 {
		mode, name = segfs.TornPrefix, "a torn unsynced tail"
	}
	p.proxy.cut()
	segCrashed := p.segFS.Crash(mode, p.rng, func() { pebCrashed = p.pebFS.CrashClone(vfs.CrashCloneCfg{}) })
	// The old node goes on against the old file systems until it is stopped; nothing it does
	// after the cut reaches the clones.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = p.srv.Shutdown(ctx)
	cancel()
	p.blog.Close()
	p.segFS, p.pebFS = segCrashed, pebCrashed
	p.start(t)
	t.Logf("power loss (%s) and restart", name)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestTransactionalSinkSurvivesPowerLoss is the sink scenario on the simulated power-loss file
// systems: every crash keeps only what was synced, and the data topic still holds every
// committed record exactly once and nothing else.
func TestTransactionalSinkSurvivesPowerLoss(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	p := &powerLossNode{t: t, proxy: newCutProxy(t), listen: "127.0.0.1:0", rng: rand.New(rand.NewPCG(seed, 2)),
		segFS: segfs.NewCrashableMem(), pebFS: vfs.NewCrashableMem()}
	p.start(t)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.srv.Shutdown(ctx)
		cancel()
		p.blog.Close()
	}()
	createSinkTopics(t, p.addr())
	runSink(t, p, seed, 24_000, 1500*time.Millisecond)
}
