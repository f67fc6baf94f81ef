package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/objstore/objtest"
)

// TestNodeLossKeepsDisklessRecordsTransactionsAndOffsets: a node on versitygw whose every start,
// the first included, is on an empty data directory with --restore-from-remote (the first finds
// an empty bucket and starts as a new node) serves two diskless topics made by CreateTopics with
// diskless.enable=true. Sixteen idempotent producers, each a client (a producer id) of its own,
// write numbered records to the input topic's 16 partitions; a transactional sink, a franz-go
// GroupTransactSession in a consumer group, reads them with read_committed and writes each,
// tagged with its partition and number, to the same partition of the output topic, committing
// the group's offsets in the transaction. Six times the node is SIGKILLed, its data directory
// deleted, and a new node restored from the bucket alone on the same address: three times with
// a sink transaction held open, its output acknowledged; three times with commit objects
// landing in the bucket after the node froze, unacknowledged. The clients ride through (the
// sink starts a new session when its transaction was fenced by the abort the restore makes).
// After each restore the group's committed offsets are at least those of every transaction
// the sink was told committed before the loss, and the sink never consumes an input below
// them. At the end:
//   - every input partition holds 0, 1, 2, ... without a gap or a repeat, every acknowledged
//     number among them (the producers' windows came back, so their retries stored nothing twice);
//   - the group's committed offsets reach the input's end offsets (the sink drained);
//   - read_committed reads each output partition as exactly the numbers of its input partition,
//     in order, each once: no committed transaction lost, none applied twice (offsets that went
//     back would consume again and write twice), no aborted transaction visible; the
//     transactions held open at a loss are there for read_uncommitted, aborted.
//
// It fails with the group offsets, the transactional ids or the producers' windows left out of
// the restore (diskless/recover.go): each in every run tried (3 runs of each), the third because
// a frozen node's last commit object holds producers' batches that they send again.
func TestNodeLossKeepsDisklessRecordsTransactionsAndOffsets(t *testing.T) {
	s3 := versityEnv(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	// The node reaches the bucket through a proxy that can hold its PUTs back (see the even
	// losses below). A restart after a SIGKILL waits one lease (1 s) for the killed node's.
	px := objtest.StartFaultProxy(t, s3.Endpoint, seed)
	n := startInlet(t, "--s3-bucket", s3.Bucket, "--s3-endpoint", px.URL, "--s3-path-style", "--s3-prefix", "nodeloss/",
		"--restore-from-remote", "--bucket-lease-ms", "1000")
	if !n.logged("restored from the remote tier") {
		t.Fatal("the first start, on an empty data directory, did not restore from the (empty) bucket")
	}

	const (
		in, out, group = "nodeloss-in", "nodeloss-out", "nodeloss-sink"
		partitions     = 16
		losses         = 6
	)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	resp, err := adm.CreateTopics(ctx, partitions, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, in, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}

	// 16 × 250 records a second: the producers and the sink fit a loaded 2-core machine.
	np := startNumberedProducersPaced(t, ctx, n.addr(), in, partitions, 120*time.Second,
		numberedPace{burst: 10, pause: 40 * time.Millisecond, clientEach: true})
	sk := &txnSink{t: t, addr: n.addr(), in: in, out: out, group: group, stop: make(chan struct{}), done: make(chan struct{}),
		held: make(chan int, 1), release: make(chan struct{}), known: map[int32]int64{}}
	go sk.run(ctx)
	stopSink := sync.OnceFunc(func() { close(sk.stop); <-sk.done })
	defer stopSink()

	began := time.Now()
	rng := rand.New(rand.NewPCG(seed, 7))
	heldOut := 0 // output records of the transactions held open at a loss
	for k := 1; k <= losses; k++ {
		// Each loss lands on a node that has acknowledged records and committed transactions
		// since it started: the state a restore must bring back.
		commits, acked := sk.commitCount(), np.ackedCount()
		deadline := time.Now().Add(30 * time.Second)
		for sk.commitCount() < commits+2 || np.ackedCount() < acked+1000 {
			if time.Now().After(deadline) {
				t.Fatalf("loss %d: in 30 s on the restored node the sink committed %d transactions and the producers had %d records acknowledged",
					k, sk.commitCount()-commits, np.ackedCount()-acked)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The odd losses land in a transaction whose output is acknowledged (in the bucket) and
		// whose offsets are not committed: the restore must abort it. The even ones land at a
		// random moment, with commit objects on their way: the proxy holds each PUT back
		// 150 ms, the node is frozen (SIGSTOP) while it waits for them, and SIGKILLed once they
		// have landed. Their batches are in the bucket and were never acknowledged: the
		// producers send them again to the restored node, which must know them for retries
		// (their windows came back) and store nothing twice.
		held := k%2 == 1
		landed := int64(0)
		if held {
			sk.hold.Store(true)
			select {
			case c := <-sk.held:
				heldOut += c
			case <-time.After(30 * time.Second):
				t.Fatalf("loss %d: the sink held no transaction open in 30 s", k)
			}
			n.kill()
		} else {
			time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
			px.Set(objtest.Faults{Latency: 150 * time.Millisecond})
			time.Sleep(200 * time.Millisecond)
			if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			frozen := px.Stats().Forwarded.Load()
			time.Sleep(400 * time.Millisecond)
			landed = px.Stats().Forwarded.Load() - frozen
			n.kill()
			px.Set(objtest.Faults{})
		}
		before := sk.knownOffsets() // every commit the sink was told of, all by the node just killed
		if held {
			select {
			case sk.release <- struct{}{}:
			case <-sk.done:
			}
		}
		if err := os.RemoveAll(n.dir); err != nil {
			t.Fatal(err)
		}
		n.restart()
		if !n.logged("diskless commit log recovered") {
			t.Fatalf("loss %d: the new node did not recover the diskless commit log", k)
		}
		behind := checkGroupResumed(t, ctx, adm, group, in, before, fmt.Sprintf("loss %d", k))
		t.Logf("loss %d at %v (a transaction held open: %v; bucket requests that landed after the freeze: %d): %d records acknowledged, %d sink transactions committed; group offsets of %d partitions checked after the restore, %d behind",
			k, time.Since(began).Round(time.Millisecond), held, landed, np.ackedCount(), sk.commitCount(), len(before), behind)
	}

	np.finish(t, ctx)
	total, aborted := checkSinkExactlyOnce(t, ctx, adminCl, n.addr(), np, sk, stopSink, partitions)
	// What read_committed hid: the output of the transactions that aborted, those held open at
	// a loss (acknowledged, so in the bucket, and aborted by the restore) among them.
	if aborted < heldOut {
		t.Fatalf("read_uncommitted reads %d output records beyond the committed ones, but the transactions held open at the losses had %d acknowledged", aborted, heldOut)
	}
	t.Logf("output: read_committed reads each of the %d inputs exactly once, after %d node losses; read_uncommitted reads %d records more, of aborted transactions (%d of those held open at a loss)",
		total, losses, aborted, heldOut)
}

// checkSinkExactlyOnce checks a run of numbered producers (finished) and a txnSink on the
// node at addr (cl a client of it), after node losses or takeovers:
//   - every input partition holds 0, 1, 2, ... without a gap or a repeat, every acknowledged
//     number among them;
//   - the sink drains: the group's committed offsets reach the input's end offsets (it is
//     stopped then);
//   - read_committed reads each output partition as exactly the numbers of its input
//     partition, in order, each once.
//
// It returns the input records read, and how many output records read_uncommitted reads
// beyond the committed ones (those of aborted transactions).
func checkSinkExactlyOnce(t *testing.T, ctx context.Context, cl *kgo.Client, addr string, np *numberedProducers, sk *txnSink, stopSink func(), partitions int32) (total, aborted int) {
	t.Helper()
	adm := kadm.NewClient(cl)
	began := time.Now()
	hws := map[int32]int64{}
	acked := 0
	for p := int32(0); p < partitions; p++ {
		hw, _ := listOffsets(t, ctx, cl, sk.in, p)
		got := readPartition(t, ctx, addr, sk.in, p, hw)
		a := np.check(t, p, got)
		if a == 0 {
			t.Fatalf("input partition %d: nothing acknowledged", p)
		}
		hws[p] = int64(len(got))
		total, acked = total+len(got), acked+a
	}
	t.Logf("input: %d records in %d partitions, %d of them acknowledged, each once", total, partitions, acked)

	// The sink drains: the group's offsets reach the input's ends.
	deadline := time.Now().Add(60 * time.Second)
	for {
		offs := groupOffsets(t, ctx, adm, sk.group, sk.in)
		lag := int64(0)
		for p, hw := range hws {
			if offs[p] > hw {
				t.Fatalf("input partition %d: the group's offset %d is past the end %d", p, offs[p], hw)
			}
			lag += hw - offs[p]
		}
		if lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink did not drain in 60 s: %d records behind; offsets %v, ends %v", lag, offs, hws)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopSink()
	sessions, commits, aborts := sk.stats()
	t.Logf("sink drained at %v: %d transactions committed, %d aborted, %d sessions", time.Since(began).Round(time.Millisecond), commits, aborts, sessions)

	// A plain record after the sink's last transaction closes each output partition: once it is
	// read with read_committed, so is everything before it (no transaction is left open, or
	// the last stable offset would hold it back).
	end, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	for p := int32(0); p < partitions; p++ {
		if err := end.ProduceSync(ctx, &kgo.Record{Topic: sk.out, Partition: p, Value: []byte("end")}).FirstErr(); err != nil {
			t.Fatalf("the end record of output partition %d: %v", p, err)
		}
	}
	outs := readUntilEnd(t, ctx, addr, sk.out, partitions, kgo.ReadCommitted())
	for p := int32(0); p < partitions; p++ {
		vs := outs[p]
		for i, v := range vs {
			if want := fmt.Sprintf("%02d/%09d", p, i); v != want {
				t.Fatalf("output partition %d: record %d is %q, want %q (an input consumed twice or skipped, or an aborted transaction's output visible)", p, i, v, want)
			}
		}
		if int64(len(vs)) != hws[p] {
			t.Fatalf("output partition %d: %d records, the input partition %d", p, len(vs), hws[p])
		}
	}
	aborted = -total
	for _, vs := range readUntilEnd(t, ctx, addr, sk.out, partitions, kgo.ReadUncommitted()) {
		aborted += len(vs)
	}
	return total, aborted
}

// checkGroupResumed fails the test for every partition of topic whose offset committed in the
// group, as the node answers now, is below before's (the offsets of the transactions a sink was
// told committed); it returns how many were.
func checkGroupResumed(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, before map[int32]int64, what string) (behind int) {
	t.Helper()
	after := groupOffsets(t, ctx, adm, group, topic)
	for p, o := range before {
		if after[p] < o {
			behind++
			t.Errorf("%s: partition %d: the group's committed offset is %d, but a transaction committing %d was acknowledged before", what, p, after[p], o)
		}
	}
	return behind
}

// groupOffsets is the group's committed offset of every partition of topic (0 where none),
// asked until the node answers.
func groupOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resps, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resps.Error()
		}
		if err == nil {
			got := map[int32]int64{}
			for p, r := range resps[topic] {
				got[p] = r.At
			}
			return got
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("fetch the offsets of group %s: %v", group, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readUntilEnd reads every partition of topic at the isolation level from offset 0 until its
// record "end", and returns the values before it.
func readUntilEnd(t *testing.T, ctx context.Context, addr, topic string, partitions int32, isolation kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for p := range partitions {
		assign[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(isolation),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]string{}
	ended := map[int32]bool{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(ended) < int(partitions) {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("%s: the end record read in %d partitions of %d in 30 s (a transaction left open?)", topic, len(ended), partitions)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("%s/%d: fetch: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case ended[r.Partition]:
				t.Fatalf("%s/%d: record %q at %d after the end record", topic, r.Partition, r.Value, r.Offset)
			case string(r.Value) == "end":
				ended[r.Partition] = true
			default:
				out[r.Partition] = append(out[r.Partition], string(r.Value))
			}
		})
	}
	return out
}

// txnSink is a consume-transform-produce sink: a GroupTransactSession reads the input topic in a
// group with read_committed and writes "PP/NNNNNNNNN" (the input's partition and number) to the
// same partition of the output topic, committing the group's offsets in each transaction. On
// an error that ends a session (its producer fenced by the abort a restore makes, retries
// exhausted) it starts a new one, as a restarted process would: the new session's
// InitProducerId aborts anything the old one left open, its static member takes the old one's
// place in the group (no wait for the old session to time out), and it goes on from the
// committed offsets.
type txnSink struct {
	t                    *testing.T
	addr, in, out, group string // addr: one address, or several separated by commas (the seed brokers)
	stop, done           chan struct{}
	// hold asks for the next transaction with records to be held open once its output is
	// acknowledged: the sink sends its output's count on held and waits for release.
	hold                  atomic.Bool
	held                  chan int
	release               chan struct{}
	mu                    sync.Mutex
	known                 map[int32]int64 // by input partition: the offset after the last record of a transaction End reported committed
	sessions, commits, ab int             // of transactions with records: committed, aborted
	logged                int
}

func (s *txnSink) run(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(strings.Split(s.addr, ",")...), kgo.TransactionalID("nodeloss-sink"),
			kgo.ConsumerGroup(s.group), kgo.InstanceID("nodeloss-sink-0"), kgo.ConsumeTopics(s.in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionTimeout(20*time.Second), kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(10*time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.MetadataMinAge(200*time.Millisecond)) // a new session finds the input at once (5 s by default)
		if err != nil {
			s.note("new session: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		s.sessions++
		s.mu.Unlock()
		err = s.transactions(ctx, sess)
		sess.Close()
		if err == nil {
			return
		}
		s.note("a new session after: %v", err)
	}
}

// transactions runs transactions until stop (nil) or the first error that ends the session.
func (s *txnSink) transactions(ctx context.Context, sess *kgo.GroupTransactSession) error {
	for {
		select {
		case <-s.stop:
			return nil
		default:
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollRecords(pctx, 20000)
		cancel()
		polled := map[int32]int64{}
		produced := 0
		known := s.knownOffsets()
		fs.EachRecord(func(r *kgo.Record) {
			// A session starts at the group's committed offsets, and an aborted transaction
			// goes back to them: never below a commit that was acknowledged.
			if r.Offset < known[r.Partition] {
				s.t.Errorf("sink: input %s/%d at %d consumed again, after a transaction committing offset %d was acknowledged", s.in, r.Partition, r.Offset, known[r.Partition])
				known[r.Partition] = 0 // once a partition
			}
			num, err := strconv.Atoi(string(r.Value[:9]))
			if err != nil {
				s.t.Errorf("%s/%d at %d: %q", s.in, r.Partition, r.Offset, r.Value)
				return
			}
			sess.Produce(ctx, &kgo.Record{Topic: s.out, Partition: r.Partition, Value: fmt.Appendf(nil, "%02d/%09d", r.Partition, num)}, nil)
			polled[r.Partition] = r.Offset + 1
			produced++
		})
		if len(polled) > 0 && s.hold.CompareAndSwap(true, false) {
			if err := sess.Client().Flush(ctx); err != nil {
				s.hold.Store(true)
				return err
			}
			s.held <- produced
			select {
			case <-s.release:
			case <-s.stop:
			}
		}
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		committed, err := sess.End(ectx, kgo.TryCommit)
		cancel()
		if err != nil {
			return err
		}
		s.mu.Lock()
		if committed && len(polled) > 0 {
			s.commits++
			for p, o := range polled {
				s.known[p] = max(s.known[p], o)
			}
		} else if len(polled) > 0 {
			s.ab++ // not counted: the empty ones while the node is down
		}
		s.mu.Unlock()
	}
}

// note logs a session's failure, the first 30 of them.
func (s *txnSink) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logged++; s.logged <= 30 {
		s.t.Logf("sink: "+format, args...)
	}
}

func (s *txnSink) commitCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

func (s *txnSink) knownOffsets() map[int32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[int32]int64, len(s.known))
	for p, o := range s.known {
		m[p] = o
	}
	return m
}

func (s *txnSink) stats() (sessions, commits, aborts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions, s.commits, s.ab
}
