package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/loadgen"
)

// Load shape of the kill tests: 16 producers over 16 partitions, the mission's "16 producers
// sending flat out", kept small enough for a 2-core machine. MaxBufferedRecords bounds what
// each producer holds unacknowledged (about 300 bytes a record in kgo), which also bounds what
// a kill can leave in doubt. FlushTimeout must outlast the kills: records queued while the
// node is down are retried by kgo until it is back.
const (
	loadProducers  = 16
	loadPartitions = 16
	loadDuration   = 8 * time.Second
	loadBuffered   = 2000
	// loadRate caps the records a second over all producers. Flat out, 16 producers reach
	// about a million records a second on a 2-core machine, and reading back 8 million records
	// would dominate the test's time; at this rate verification stays a few seconds, and
	// batches stay small (a few records per producer and partition), which keeps many batches
	// in flight in every producer window when the node dies.
	loadRate  = 150_000
	loadFlush = 60 * time.Second
	// killPause is how long the node stays dead before it is restarted.
	killPause = 300 * time.Millisecond
)

// TestKill9MidLoadIdempotentExactlyOnce: idempotent producers keep exactly once through two
// kill -9 restarts. Batches that were durable before a kill but whose acks were lost are
// retried by kgo with their original sequence numbers after the restart; the recovered
// producer windows must answer them as duplicates. Any record stored twice, any acknowledged
// record missing, or any reordering within a producer's partition fails the verification.
func TestKill9MidLoadIdempotentExactlyOnce(t *testing.T) {
	forEachLayout(t, func(t *testing.T, args []string) {
		res := runLoadWithKills(t, args, true, 2)
		if !res.Verify.OK {
			t.Fatalf("exactly once violated across kill -9: %s", verifyLine(res.Verify))
		}
	})
}

// TestKill9MidLoadPlainAtLeastOnce: plain producers lose no acknowledged record through two
// kill -9 restarts. Their retries may store records twice; that is allowed and logged.
func TestKill9MidLoadPlainAtLeastOnce(t *testing.T) {
	forEachLayout(t, func(t *testing.T, args []string) {
		res := runLoadWithKills(t, args, false, 2)
		if !res.Verify.OK {
			t.Fatalf("at least once violated across kill -9: %s", verifyLine(res.Verify))
		}
		t.Logf("plain producers: %d duplicates, %d out of order (allowed at least once)", res.Verify.Duplicates, res.Verify.OutOfOrder)
	})
}

// runLoadWithKills runs loadgen against a fresh node started with args and SIGKILLs and
// restarts the node kills times while the producers are sending. It checks what every mode
// shares (the run finished, verification ran, no record was left unresolved or failed, high
// watermarks that a client saw before a kill survived it) and returns the result for the
// mode's own verdict.
func runLoadWithKills(t *testing.T, args []string, idempotent bool, kills int) *loadgen.Result {
	n := startInlet(t, args...)
	mode := "plain"
	if idempotent {
		mode = "idempotent"
	}
	topic := "crash-" + mode
	cfg := loadgen.Config{
		Brokers:            []string{n.addr()},
		Topic:              topic,
		Partitions:         loadPartitions,
		Producers:          loadProducers,
		Idempotent:         idempotent,
		Duration:           loadDuration,
		MaxBufferedRecords: loadBuffered,
		FlushTimeout:       loadFlush,
		Rate:               loadRate,
		Verify:             true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	type outcome struct {
		res *loadgen.Result
		err error
	}
	done := make(chan outcome, 1)
	began := time.Now()
	go func() {
		res, err := loadgen.Run(ctx, cfg)
		done <- outcome{res, err}
	}()

	probe := newOffsetProbe(t, n.addr(), topic)
	var (
		o        outcome
		finished bool // loadgen has returned; o holds its outcome
	)
	// waitProgress waits until the partitions together hold more than above records, so a kill
	// lands while records are flowing (not during the producers' warm-up). It returns false
	// if loadgen finished first.
	waitProgress := func(above int64) ([]int64, bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case o = <-done:
				finished = true
				return nil, false
			default:
			}
			if ends, ok := probe.ends(loadPartitions); ok && sum(ends) > above {
				return ends, true
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no produce progress past %d records within 20s", above)
		return nil, false
	}

	ends, ok := waitProgress(0)
	if !ok {
		t.Fatalf("loadgen finished before any record was committed: err=%v", o.err)
	}
	t.Logf("%s: records flowing after %v (%d committed)", mode, time.Since(began).Round(time.Millisecond), sum(ends))
	for k := 1; k <= kills; k++ {
		// The first kill waits for full flow; later ones come sooner, so that they too land
		// while the producers are sending (kgo takes 2-3s to come back after a restart).
		if k == 1 {
			time.Sleep(1500 * time.Millisecond)
		} else {
			time.Sleep(time.Second)
		}
		before, ok := probe.ends(loadPartitions)
		if !ok {
			before = ends
		}
		n.kill()
		t.Logf("%s: kill %d at %v, %d records committed just before", mode, k, time.Since(began).Round(time.Millisecond), sum(before))
		time.Sleep(killPause)
		n.restart()
		// Any answer will do here: the recovered high watermarks.
		after, ok := waitProgress(-1)
		if !ok {
			break
		}
		// A high watermark a client has seen was published only after its group was synced,
		// so no kill may take it back.
		for p := range before {
			if after[p] < before[p] {
				t.Errorf("kill %d: partition %d high watermark went back from %d to %d", k, p, before[p], after[p])
			}
		}
		t.Logf("%s: restart %d recovered %d committed records", mode, k, sum(after))
		if k == kills {
			break
		}
		restarted := time.Now()
		if ends, ok = waitProgress(sum(after)); !ok {
			break
		}
		t.Logf("%s: producers resumed %v after restart %d", mode, time.Since(restarted).Round(time.Millisecond), k)
	}
	if finished {
		// Only a slow machine gets here: every record was acknowledged before the next kill.
		t.Logf("%s: loadgen finished before all %d kills were done", mode, kills)
	} else {
		select {
		case o = <-done:
		case <-ctx.Done():
			t.Fatalf("loadgen did not finish within the test's bound")
		}
	}
	if o.err != nil {
		t.Fatalf("loadgen: %v", o.err)
	}
	res := o.res
	var summary bytes.Buffer
	_ = res.WriteSummary(&summary)
	t.Logf("%s run (%v in all):\n%s", mode, time.Since(began).Round(time.Millisecond), summary.String())

	if res.Verify == nil {
		t.Fatalf("no verification result (interrupted %t)", res.Interrupted)
	}
	t.Logf("verify: %s", verifyLine(res.Verify))
	if res.Verify.Error != "" {
		t.Errorf("verification could not finish: %s", res.Verify.Error)
	}
	if res.FlushTimedOut {
		t.Errorf("acks still outstanding %v after sending stopped: the producers did not recover from the restarts", cfg.FlushTimeout)
	}
	if res.Unresolved > 0 {
		t.Errorf("%d records neither acked nor failed", res.Unresolved)
	}
	if res.Acked == 0 {
		t.Errorf("nothing acknowledged")
	}
	if res.Failed > 0 {
		// kgo retries without limit, so a failure means the client gave up on the broker.
		t.Errorf("%d records failed on the producer side: %v", res.Failed, res.Errors)
	}
	return res
}

func verifyLine(v *loadgen.VerifyResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: acked %d, read %d, found %d, lost %d, duplicates %d, out of order %d, unacked present %d, malformed %d, unknown %d",
		v.Verdict(), v.Acked, v.Read, v.Found, v.Lost, v.Duplicates, v.OutOfOrder, v.UnackedPresent, v.Malformed, v.Unknown)
	if v.Error != "" {
		fmt.Fprintf(&b, "; error: %s", v.Error)
	}
	if !v.OK {
		for _, m := range v.Mismatches {
			fmt.Fprintf(&b, "\n  %s", m)
		}
	}
	return b.String()
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// offsetProbe reads a topic's high watermarks through its own kgo client, which reconnects
// across restarts by itself.
type offsetProbe struct {
	t     *testing.T
	adm   *kadm.Client
	topic string
}

func newOffsetProbe(t *testing.T, addr, topic string) *offsetProbe {
	t.Helper()
	// kgo waits MetadataMinAge (5s by default) before asking again about a topic it was told
	// does not exist yet; the probe starts before loadgen has created it.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("crashtest-probe"), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatalf("probe client: %v", err)
	}
	t.Cleanup(cl.Close)
	return &offsetProbe{t: t, adm: kadm.NewClient(cl), topic: topic}
}

// ends returns the high watermark of partitions 0..partitions-1, or false when the broker
// did not answer in time or the topic does not exist yet.
func (p *offsetProbe) ends(partitions int) ([]int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	listed, err := p.adm.ListEndOffsets(ctx, p.topic)
	if err != nil || listed.Error() != nil {
		return nil, false
	}
	out := make([]int64, partitions)
	for i := range out {
		o, ok := listed.Lookup(p.topic, int32(i))
		if !ok {
			return nil, false
		}
		out[i] = o.Offset
	}
	return out, true
}

// TestReplayCapturedProduceAfterRestart: a Produce request captured byte for byte before a
// kill -9 and resent after the restart is a duplicate (a resent batch is answered with its original
// offsets even after kill -9): success with the original base offset, and
// nothing is appended. The recovered window also still knows where the producer stands: a
// gap is OUT_OF_ORDER_SEQUENCE_NUMBER and the next sequence is appended after the old records.
func TestReplayCapturedProduceAfterRestart(t *testing.T) {
	forEachLayout(t, testReplayCapturedProduceAfterRestart)
}

func testReplayCapturedProduceAfterRestart(t *testing.T, args []string) {
	n := startInlet(t, args...)
	const (
		topic     = "replay"
		partition = 0
	)
	rc := dialRaw(t, n.addr())
	pid, epoch := rc.initProducerID()
	t.Logf("producer id %d epoch %d", pid, epoch)
	if epoch != 0 {
		t.Fatalf("InitProducerId epoch %d, want 0", epoch)
	}

	captured, _ := rc.encode(produceRequest(topic, partition, idempotentBatch(pid, epoch, 0, 10, "a")))
	// The frame is written from a copy so that nothing can touch the captured bytes.
	first := kmsg.NewPtrProduceResponse()
	rc.send(bytes.Clone(captured), first)
	r1 := produceResult(t, first)
	if r1.ErrorCode != 0 {
		t.Fatalf("first produce: error code %d (%v)", r1.ErrorCode, r1.ErrorMessage)
	}
	base := r1.BaseOffset
	t.Logf("captured produce (%d bytes): base offset %d", len(captured), base)

	second := rc.roundTrip(produceRequest(topic, partition, idempotentBatch(pid, epoch, 10, 10, "a"))).(*kmsg.ProduceResponse)
	r2 := produceResult(t, second)
	if r2.ErrorCode != 0 || r2.BaseOffset != base+10 {
		t.Fatalf("second produce: error code %d, base offset %d, want 0 and %d", r2.ErrorCode, r2.BaseOffset, base+10)
	}
	hw := rc.listLatest(topic, partition)
	if hw != base+20 {
		t.Fatalf("high watermark %d before the kill, want %d", hw, base+20)
	}

	n.kill()
	n.restart()

	rc = dialRaw(t, n.addr())
	replay := kmsg.NewPtrProduceResponse()
	rc.send(bytes.Clone(captured), replay)
	rr := produceResult(t, replay)
	t.Logf("replayed captured produce after restart: error code %d, base offset %d", rr.ErrorCode, rr.BaseOffset)
	if rr.ErrorCode != 0 {
		t.Errorf("replay after restart: error code %d, want 0 (a duplicate is a success)", rr.ErrorCode)
	}
	if rr.BaseOffset != base {
		t.Errorf("replay after restart: base offset %d, want the original %d", rr.BaseOffset, base)
	}
	if got := rc.listLatest(topic, partition); got != hw {
		t.Fatalf("high watermark %d after the replay, want it unchanged at %d (the replay was stored again)", got, hw)
	}

	gap := rc.roundTrip(produceRequest(topic, partition, idempotentBatch(pid, epoch, 25, 10, "a"))).(*kmsg.ProduceResponse)
	if rg := produceResult(t, gap); rg.ErrorCode != 45 {
		t.Errorf("sequence 25 after 0..19: error code %d, want 45 OUT_OF_ORDER_SEQUENCE_NUMBER", rg.ErrorCode)
	}
	if got := rc.listLatest(topic, partition); got != hw {
		t.Fatalf("high watermark %d after the refused batch, want %d", got, hw)
	}

	next := rc.roundTrip(produceRequest(topic, partition, idempotentBatch(pid, epoch, 20, 10, "a"))).(*kmsg.ProduceResponse)
	if rn := produceResult(t, next); rn.ErrorCode != 0 || rn.BaseOffset != base+20 {
		t.Errorf("sequence 20 after the restart: error code %d, base offset %d, want 0 and %d", rn.ErrorCode, rn.BaseOffset, base+20)
	}
	if got := rc.listLatest(topic, partition); got != base+30 {
		t.Errorf("high watermark %d after sequence 20, want %d", got, base+30)
	}
}

// TestProducerIDsNeverReusedAcrossKill: producer ids handed out before a kill -9 are never
// handed out again (ids are reserved in synced blocks; a restart resumes after the last block).
// A reused id would let a new producer's sequence 0 be taken for a duplicate of an old one's.
func TestProducerIDsNeverReusedAcrossKill(t *testing.T) {
	n := startInlet(t)
	var seen []int64
	maxID := int64(-1)
	for round := 0; round < 3; round++ {
		rc := dialRaw(t, n.addr())
		for i := 0; i < 3; i++ {
			id, epoch := rc.initProducerID()
			if epoch != 0 {
				t.Errorf("round %d: producer id %d epoch %d, want 0", round, id, epoch)
			}
			if id <= maxID {
				t.Errorf("round %d: producer id %d is not above every earlier id (max %d; all %v)", round, id, maxID, seen)
			}
			seen = append(seen, id)
			maxID = max(maxID, id)
		}
		t.Logf("round %d: producer ids so far %v", round, seen)
		if round < 2 {
			n.kill()
			n.restart()
		}
	}
}

// TestSigtermDrains: SIGTERM under acks=all load stops the node cleanly: it exits 0 within a
// few seconds, and every record whose produce promise succeeded is readable after a restart.
func TestSigtermDrains(t *testing.T) {
	forEachLayout(t, testSigtermDrains)
}

func testSigtermDrains(t *testing.T, args []string) {
	n := startInlet(t, args...)
	const (
		topic    = "drain"
		clients  = 4
		exitWait = 5 * time.Second
	)
	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		failed   atomic.Int64
		produced atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	prodCtx, cancelProduce := context.WithCancel(context.Background())
	defer cancelProduce()
	cls := make([]*kgo.Client, clients)
	for i := range cls {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(n.addr()),
			kgo.ClientID(fmt.Sprintf("crashtest-drain-%d", i)),
			kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.AllowAutoTopicCreation(),
			kgo.MaxBufferedRecords(1000),
			kgo.ProducerLinger(2*time.Millisecond),
		)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		cls[i] = cl
		wg.Go(func() {
			for seq := 0; !stop.Load(); seq++ {
				v := fmt.Sprintf("c%d-%d", i, seq)
				produced.Add(1)
				cl.Produce(prodCtx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
						return
					}
					mu.Lock()
					acked[string(r.Value)] = true
					mu.Unlock()
				})
			}
		})
	}
	countAcked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	deadline := time.Now().Add(15 * time.Second)
	for countAcked() < 5000 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	before := countAcked()
	if before == 0 {
		t.Fatalf("nothing acknowledged within 15s")
	}
	time.Sleep(300 * time.Millisecond) // under full load, not just after a lull

	state, took := n.terminate(exitWait)
	if state == nil {
		t.Errorf("still running %v after SIGTERM", exitWait)
		// Give the drain its own 30s bound before deciding it hangs.
		state, took = n.terminate(35 * time.Second)
		if state == nil {
			n.kill()
			t.Fatalf("did not exit within 35s of SIGTERM")
		}
	}
	t.Logf("SIGTERM: exited after %v with %v (%d acked when the signal was sent)", took.Round(time.Millisecond), state, before)
	if code := state.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}

	// The node is gone: no promise can succeed any more. Stop producing and fail what the
	// clients still hold.
	stop.Store(true)
	cancelProduce()
	closed := make(chan struct{})
	go func() {
		for _, cl := range cls {
			cl.Close()
		}
		wg.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatalf("kgo clients did not close within 20s")
	}
	mu.Lock()
	want := make(map[string]bool, len(acked))
	for v := range acked {
		want[v] = true
	}
	mu.Unlock()
	t.Logf("producers: %d records produced, %d acked, %d failed (after the node stopped)", produced.Load(), len(want), failed.Load())

	n.restart()
	got := readAll(t, n.addr(), topic)
	missing := 0
	var examples []string
	for v := range want {
		if got[v] == 0 {
			missing++
			if len(examples) < 10 {
				examples = append(examples, v)
			}
		}
	}
	var total, dups int
	for _, c := range got {
		total += c
		if c > 1 {
			dups += c - 1
		}
	}
	t.Logf("read back after restart: %d records, %d distinct, %d duplicates", total, len(got), dups)
	if missing > 0 {
		t.Errorf("%d acknowledged records missing after SIGTERM and restart, e.g. %v", missing, examples)
	}
	if dups > 0 {
		t.Errorf("%d records stored twice by idempotent producers", dups)
	}
}

// readAll reads every record of every partition of topic, from the log start to the high
// watermark at the time of the call, and counts each value.
func readAll(t *testing.T, addr, topic string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("crashtest-admin"))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	next := map[int32]int64{}
	end := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			next[o.Partition], end[o.Partition] = s.Offset, o.Offset
			offsets[o.Partition] = kgo.NewOffset().At(s.Offset)
		}
	})
	got := map[string]int{}
	if len(offsets) == 0 {
		return got
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ClientID("crashtest-reader"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
	)
	if err != nil {
		t.Fatalf("reader client: %v", err)
	}
	defer cl.Close()
	remaining := len(offsets)
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back timed out with %d partitions unfinished: %v", remaining, next)
		}
		fetches.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch partition %d: %v", p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < next[r.Partition] || r.Offset >= end[r.Partition] {
				return
			}
			got[string(r.Value)]++
			next[r.Partition] = r.Offset + 1
			if next[r.Partition] == end[r.Partition] {
				remaining--
			}
		})
	}
	return got
}

// TestSigtermFinishesPartialRequest: a request whose first bytes were read before SIGTERM is
// part of what the drain waits for (Server.Shutdown: "every request already read"), so the
// rest of it must still be read. The frame is sent in two writes with SIGTERM (and the node's
// "draining" log line) in between; the node must read the second half, commit and answer the
// produce, and exit 0 well within its 30s drain bound.
func TestSigtermFinishesPartialRequest(t *testing.T) {
	n := startInlet(t)
	const topic = "drain-partial"
	rc := dialRaw(t, n.addr())
	pid, epoch := rc.initProducerID()
	// Create the topic first so the split request is a plain append.
	warm := rc.roundTrip(produceRequest(topic, 0, idempotentBatch(pid, epoch, 0, 1, "p"))).(*kmsg.ProduceResponse)
	if r := produceResult(t, warm); r.ErrorCode != 0 {
		t.Fatalf("first produce: error code %d", r.ErrorCode)
	}

	frame, _ := rc.encode(produceRequest(topic, 0, idempotentBatch(pid, epoch, 1, 100, "p")))
	half := len(frame) / 2
	_ = rc.c.SetDeadline(time.Now().Add(rawIOTimeout))
	if _, err := rc.c.Write(frame[:half]); err != nil {
		t.Fatalf("write first half: %v", err)
	}
	// Let the node frame the first half before it starts draining.
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	n.sigterm()
	n.waitLogged("msg=draining", 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	if _, err := rc.c.Write(frame[half:]); err != nil {
		t.Fatalf("write second half: %v", err)
	}
	state := n.waitExit(40 * time.Second)
	took := time.Since(began)
	if state == nil {
		n.kill()
		t.Fatalf("did not exit within 40s of SIGTERM")
	}
	t.Logf("SIGTERM: exited after %v with %v", took.Round(time.Millisecond), state)
	if took > 5*time.Second || state.ExitCode() != 0 {
		t.Errorf("exit after %v with %v, want status 0 within 5s", took.Round(time.Millisecond), state)
	}

	// A reply written before the exit is still in the socket.
	resp := kmsg.NewPtrProduceResponse()
	rc.recv(frame, resp)
	r := produceResult(t, resp)
	t.Logf("split produce answered during the drain: error code %d, base offset %d", r.ErrorCode, r.BaseOffset)
	if r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Errorf("split produce: error code %d, base offset %d, want 0 and 1", r.ErrorCode, r.BaseOffset)
	}

	n.restart()
	if hw := dialRaw(t, n.addr()).listLatest(topic, 0); hw != 101 {
		t.Errorf("high watermark %d after the restart, want 101", hw)
	}
}
