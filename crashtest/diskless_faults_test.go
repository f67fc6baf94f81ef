package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/objstore/objtest"
)

// TestDisklessRidesOutBucketFaultsAndAcknowledgesOnlyWhatLanded: one node reaches versitygw
// through a fault-injecting proxy and serves a diskless topic, which numbered idempotent
// producers write to flat out, and a local topic. The proxy goes through added latency, 5xx
// answers, connections cut mid-request, PUTs that land with their reply lost (the lease's
// renewals included), all of those at once, and then an outage longer than the diskless
// request timeout. Through the faults the producers go on being acknowledged. During the
// outage:
//   - a produce to the diskless topic is answered a retriable error (REQUEST_TIMED_OUT, or
//     KAFKA_STORAGE_ERROR once the backlog is full, or NOT_LEADER_OR_FOLLOWER once the lease
//     has lapsed), never success, and no numbered record is acknowledged;
//   - a flood of 1 MiB batches fills the backlog and is then refused KAFKA_STORAGE_ERROR at
//     once, 48 requests at a time, none let in: the backlog (inlet_diskless_pending_bytes)
//     stays within --diskless-max-pending-bytes plus what was let in just below it, and the
//     node's resident memory within twice that and the flood's frames;
//   - a producer to the local topic is acknowledged throughout.
//
// Once the bucket is back the producers are acknowledged again, and inlet_diskless_*'s
// failure counters show what happened. Then the bucket goes down again, the node is
// SIGKILLed in the outage, its data directory deleted, and it is restored from versitygw
// directly: every acknowledged number is read once, in order. A committer that answered a
// produce before its commit object landed would lose records acknowledged during the
// outage; one that stored a lost-reply object again under the next number would serve its
// records twice.
func TestDisklessRidesOutBucketFaultsAndAcknowledgesOnlyWhatLanded(t *testing.T) {
	s3 := versityEnv(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault proxy seed %d", seed)
	px := objtest.StartFaultProxy(t, s3.Endpoint, seed)

	const (
		budget         = 8 << 20 // --diskless-max-pending-bytes
		requestTimeout = 3 * time.Second
		topic, local   = "orders", "local"
		partitions     = 2 // numbered; partition 2 takes the outage's flood
		floodBatch     = 1 << 20
		flooders       = 48
	)
	args := func(endpoint string) []string {
		return []string{"--s3-bucket", s3.Bucket, "--s3-endpoint", endpoint, "--s3-path-style", "--s3-prefix", "faults/",
			"--restore-from-remote", "--metrics-listen", "127.0.0.1:0",
			// Renewed every 3.3 s, writable until 8 s after the last renewal: it lapses
			// 4.7 s into the outage below at the earliest (the flood fills the backlog
			// before), and the restart after the SIGKILL waits 10 s for it.
			"--bucket-lease-ms", "10000",
			"--diskless-request-timeout-ms", fmt.Sprint(requestTimeout.Milliseconds()),
			"--diskless-max-pending-bytes", "8MiB",
			// 1 MiB objects, so that the copies held for the bucket grow with the backlog
			// in steps of 1 MiB rather than of the default 8.
			"--diskless-commit-bytes", "1MiB"}
	}
	n := startInlet(t, args(px.URL)...)
	metrics := n.metricsAddr()

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if r, err := adm.CreateTopic(ctx, partitions+1, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, topic); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, local); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", local, err, r.Err)
	}

	np := startNumberedProducers(t, ctx, n.addr(), topic, partitions, 120*time.Second)
	acked := func() int {
		np.mu.Lock()
		defer np.mu.Unlock()
		k := 0
		for _, m := range np.acked {
			k += len(m)
		}
		return k
	}
	waitFor(t, 10*time.Second, "the producers are acknowledged", func() bool { return acked() > 0 })

	// Each fault for a few seconds; the producers must be acknowledged in each.
	for _, ph := range []struct {
		name string
		f    objtest.Faults
	}{
		{"300 ms of latency per request", objtest.Faults{Latency: 300 * time.Millisecond}},
		{"30% of requests answered 503 SlowDown or 500", objtest.Faults{Fail: 0.3}},
		{"30% of connections cut mid-request", objtest.Faults{Cut: 0.3}},
		{"every landed PUT's reply lost", objtest.Faults{LoseReplies: 1}},
		{"all at once", objtest.Faults{Latency: 50 * time.Millisecond, Fail: 0.15, Cut: 0.15, LoseReplies: 0.5}},
	} {
		before := acked()
		px.Set(ph.f)
		time.Sleep(2 * time.Second)
		waitFor(t, 10*time.Second, "the producers are acknowledged under "+ph.name, func() bool { return acked() > before })
		t.Logf("%s: %d records acknowledged", ph.name, acked()-before)
	}
	st := px.Stats()
	if st.Failed.Load() == 0 || st.Cut.Load() == 0 || st.LostReplies.Load() == 0 {
		t.Fatalf("the proxy injected %d 5xx, %d cuts, %d lost replies: some fault never happened", st.Failed.Load(), st.Cut.Load(), st.LostReplies.Load())
	}

	// The outage.
	px.Set(objtest.Faults{Down: true})
	outage := time.Now()
	rssBefore, _ := procStat(n.cmd.Process.Pid)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// A produce sent as the outage begins is held for the bucket and answered once the
	// request timeout has passed, with a retriable error.
	probe := make(chan int16, 1)
	wg.Go(func() {
		resp, err := produceRequest(topic, partitions, idempotentBatch(-1, -1, -1, 1, "in-the-outage")).RequestWith(ctx, admin)
		if err != nil {
			t.Errorf("produce in the outage: %v", err)
			probe <- -1
			return
		}
		probe <- produceResult(t, resp).ErrorCode
	})
	// The flood, to partition 2 in batches of 1 MiB. First the backlog is filled one batch at
	// a time, each sent once the backlog shows the one before (a batch is counted once it is
	// durable locally, after Admit let it in, so batches sent together would all be let in):
	// the first that comes once it is full is refused KAFKA_STORAGE_ERROR at once. Then 48
	// requests at a time, six times the budget, each sent again a second after its refusal:
	// none may be let in, as nothing leaves the backlog while the bucket is down. All of it
	// within 2 s or so, before the lease can lapse.
	var floodSent, floodHeld, floodRefused, floodNotLeader, floodOther, floodLetIn atomic.Int64
	// 15 records of 64 KiB: a batch just under max.message.bytes (1 MiB).
	big := idempotentBatch(-1, -1, -1, 15, strings.Repeat("f", 64<<10))
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	send := func() int16 {
		resp, err := produceRequest(topic, partitions, big).RequestWith(ctx, admin)
		if err != nil {
			return -1
		}
		floodSent.Add(int64(len(big)))
		switch code := resp.Topics[0].Partitions[0].ErrorCode; code {
		case kerr.RequestTimedOut.Code:
			floodHeld.Add(1)
			return code
		case kerr.KafkaStorageError.Code:
			floodRefused.Add(1)
			return code
		case kerr.NotLeaderForPartition.Code:
			floodNotLeader.Add(1) // the lease lapsed
			return code
		default:
			if !stopped() && floodOther.Add(1) == 1 {
				t.Errorf("a flood request answered error %d (%v) in the outage", code, kerr.ErrorForCode(code))
			}
			return code
		}
	}
	wg.Go(func() {
		mc := &http.Client{Timeout: time.Second}
		pending := func() float64 { return scrapeValue(mc, metrics, "inlet_diskless_pending_bytes") }
	fill:
		for sent := 1; ; sent++ {
			if sent > 2*budget/floodBatch {
				t.Errorf("the backlog let in %d flood batches (%d MiB) without a refusal", sent-1, (sent-1)*floodBatch>>20)
				break
			}
			before := pending()
			answer := make(chan int16, 1)
			wg.Go(func() { answer <- send() })
			for deadline := time.Now().Add(5 * time.Second); ; {
				select {
				case code := <-answer:
					if code != kerr.KafkaStorageError.Code {
						t.Errorf("flood batch %d answered %d (%v) at once, with %.1f MiB in the backlog; want KAFKA_STORAGE_ERROR once it is full",
							sent, code, kerr.ErrorForCode(code), before/(1<<20))
					}
					break fill
				case <-time.After(20 * time.Millisecond):
				}
				if pending() >= before+float64(len(big)) {
					break
				}
				if time.Now().After(deadline) || stopped() {
					t.Errorf("flood batch %d was neither counted in the backlog nor refused within 5 s", sent)
					break fill
				}
			}
		}
		for range flooders {
			wg.Go(func() {
				for !stopped() {
					switch code := send(); {
					case code == kerr.RequestTimedOut.Code && !stopped():
						// Let in with the backlog full: counted below.
						floodLetIn.Add(1)
					case code == kerr.KafkaStorageError.Code || code == kerr.NotLeaderForPartition.Code:
						time.Sleep(time.Second) // refused at once: do not spin
					}
				}
			})
		}
	})
	// The local topic's producer, acknowledged within 2 s each time.
	lp, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.DefaultProduceTopic(local))
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	var localAcked atomic.Int64
	var localErr atomic.Value
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			err := lp.ProduceSync(pctx, &kgo.Record{Value: fmt.Appendf(nil, "local-%d", i)}).FirstErr()
			pcancel()
			if err != nil {
				localErr.Store(err)
				return
			}
			localAcked.Add(1)
		}
	})
	// Sample the backlog and the node's memory; note the acknowledgements once replies to
	// what landed before the outage have arrived.
	var maxPending float64
	var maxRSS int64
	var ackedInOutage int
	mclient := &http.Client{Timeout: time.Second}
	for time.Since(outage) < 6*time.Second {
		time.Sleep(100 * time.Millisecond)
		if v := scrapeValue(mclient, metrics, "inlet_diskless_pending_bytes"); v > maxPending {
			maxPending = v
		}
		if r, _ := procStat(n.cmd.Process.Pid); r > maxRSS {
			maxRSS = r
		}
		if ackedInOutage == 0 && time.Since(outage) > time.Second {
			ackedInOutage = acked()
		}
	}
	if a := acked(); a != ackedInOutage {
		t.Errorf("%d numbered records acknowledged while the bucket was down", a-ackedInOutage)
	}
	close(stop)
	select {
	case code := <-probe:
		switch code {
		case kerr.RequestTimedOut.Code, kerr.KafkaStorageError.Code, kerr.NotLeaderForPartition.Code:
			t.Logf("a produce in the outage: error %d (%s)", code, kerr.ErrorForCode(code))
		default:
			t.Errorf("a produce in the outage: error %d (%v), want REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR or NOT_LEADER_OR_FOLLOWER", code, kerr.ErrorForCode(code))
		}
	default:
		t.Errorf("a produce sent as the outage began was not answered within 6 s (request timeout %v)", requestTimeout)
	}
	px.Set(objtest.Faults{})
	recovered := time.Now()
	wg.Wait()
	if err, _ := localErr.Load().(error); err != nil {
		t.Errorf("the local topic's producer failed in the outage: %v", err)
	}
	t.Logf("outage: local topic %d acknowledged; flood sent %d MiB, %d held and timed out, %d refused KAFKA_STORAGE_ERROR, %d NOT_LEADER_OR_FOLLOWER (the lease lapsed); backlog peak %.1f MiB; RSS %d -> peak %d MiB",
		localAcked.Load(), floodSent.Load()>>20, floodHeld.Load(), floodRefused.Load(), floodNotLeader.Load(), maxPending/(1<<20), rssBefore>>20, maxRSS>>20)
	if localAcked.Load() < 10 {
		t.Errorf("the local topic's producer was acknowledged %d times in 6 s of outage, want one every few hundred ms", localAcked.Load())
	}
	if floodLetIn.Load() > 0 {
		t.Errorf("%d flood requests were let in with the backlog full (held until the request timeout rather than refused)", floodLetIn.Load())
	}
	// The backlog holds at most the budget plus what was let in just below it: the last
	// flood batch and the numbered producers' batches of the moment (64 KiB each, a few
	// requests in flight). Without the bound the flood would add 48 MiB.
	if limit := float64(budget + 3*floodBatch); maxPending > limit || maxPending < budget {
		t.Errorf("the backlog peaked at %.1f MiB, want at least the budget (%d MiB) and at most %.0f MiB", maxPending/(1<<20), budget>>20, limit/(1<<20))
	}
	// The node's memory grows by the backlog, the frames of the flood's requests (each read
	// whole before it is let in or refused: 48 MiB at most at once) and the garbage
	// collector's headroom over them (GOGC=100: the heap may grow to twice what is live
	// before a collection).
	// 32 MiB more for what the runtime keeps besides (stacks, memory freed and not returned
	// yet). Measured: 76 to 90 MiB; 290 MiB with the backlog unbounded.
	if grown, limit := maxRSS-rssBefore, int64(2*(budget+3*floodBatch+flooders*floodBatch)+32<<20); grown > limit {
		t.Errorf("RSS grew by %d MiB in the outage, want at most %d MiB", grown>>20, limit>>20)
	}

	// Back: the producers are acknowledged again.
	back := acked()
	waitFor(t, 30*time.Second, "the producers are acknowledged once the bucket is back", func() bool { return acked() > back })
	t.Logf("acknowledged again %v after the bucket came back", time.Since(recovered).Round(time.Millisecond))
	m := scrape(t, metrics)
	for _, name := range []string{"inlet_diskless_puts_total", "inlet_diskless_put_failures_total", "inlet_diskless_requests_timed_out_total"} {
		if m[name] == 0 {
			t.Errorf("%s is 0 after the faults", name)
		}
	}
	t.Logf("metrics: %v puts, %v put failures, %v requests timed out, pending %v bytes", m["inlet_diskless_puts_total"],
		m["inlet_diskless_put_failures_total"], m["inlet_diskless_requests_timed_out_total"], m["inlet_diskless_pending_bytes"])

	// Down again, and the node is lost with its disk in the outage; it comes back from
	// versitygw directly.
	px.Set(objtest.Faults{Down: true})
	time.Sleep(1500 * time.Millisecond)
	n.kill()
	if err := os.RemoveAll(n.dir); err != nil {
		t.Fatal(err)
	}
	n.args = args(s3.Endpoint)
	n.restart()
	atRestart := acked()
	waitFor(t, 30*time.Second, "the producers are acknowledged by the restored node", func() bool { return acked() > atRestart })
	np.finish(t, ctx)

	for p := int32(0); p < partitions; p++ {
		hw, _ := listOffsets(t, ctx, admin, topic, p)
		got := readPartition(t, ctx, n.addr(), topic, p, hw)
		want := np.check(t, p, got)
		t.Logf("partition %d: %d acknowledged, %d read from 0 to %d after the restore", p, want, len(got), hw)
	}
	t.Logf("proxy: %d requests, %d forwarded, %d 5xx, %d cut, %d replies lost, %d connections refused", st.Requests.Load(),
		st.Forwarded.Load(), st.Failed.Load(), st.Cut.Load(), st.LostReplies.Load(), st.Refused.Load())
}
