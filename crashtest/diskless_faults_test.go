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
//   - a flood of 1 MiB batches fills the backlog: it is refused KAFKA_STORAGE_ERROR, the
//     backlog (inlet_diskless_pending_bytes) stays within --diskless-max-pending-bytes plus
//     one request's batches, and the node's resident memory grows by less than the flood sent;
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
		budget         = 16 << 20 // --diskless-max-pending-bytes
		requestTimeout = 3 * time.Second
		topic, local   = "orders", "local"
		partitions     = 2 // numbered; partition 2 takes the outage's flood
		floodBatch     = 1 << 20
		flooders       = 20
	)
	args := func(endpoint string) []string {
		return []string{"--s3-bucket", s3.Bucket, "--s3-endpoint", endpoint, "--s3-path-style", "--s3-prefix", "faults/",
			"--restore-from-remote", "--metrics-listen", "127.0.0.1:0",
			// Renewed every 2 s, writable until 4.8 s after the last renewal: the outage
			// below outlasts it, and the restart after the SIGKILL waits 6 s for it.
			"--bucket-lease-ms", "6000",
			"--diskless-request-timeout-ms", fmt.Sprint(requestTimeout.Milliseconds()),
			"--diskless-max-pending-bytes", "16MiB",
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
	// The flood: 20 requests of 1 MiB to partition 2, one more every 50 ms, more than the
	// budget takes: each is held until the request timeout and sent again at once, and the
	// ones that come once the backlog is full are refused at once and sent again after 500 ms.
	// (A batch is counted in the backlog once it is durable locally, after Admit: requests
	// that arrive together are all admitted, so the flood is spread out to find the bound
	// well before the lease lapses, 2.8 s into the outage at the earliest.)
	var floodSent, floodRefused, floodOther atomic.Int64
	// 15 records of 64 KiB: a batch just under max.message.bytes (1 MiB).
	big := idempotentBatch(-1, -1, -1, 15, strings.Repeat("f", 64<<10))
	for i := range flooders {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 50 * time.Millisecond)
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := produceRequest(topic, partitions, big).RequestWith(ctx, admin)
				if err != nil {
					return
				}
				floodSent.Add(int64(len(big)))
				switch code := resp.Topics[0].Partitions[0].ErrorCode; code {
				case kerr.RequestTimedOut.Code:
				case kerr.KafkaStorageError.Code, kerr.NotLeaderForPartition.Code:
					// Refused at once (the backlog full, or the lease lapsed): do not spin.
					if code == kerr.KafkaStorageError.Code {
						floodRefused.Add(1)
					}
					time.Sleep(500 * time.Millisecond)
				default:
					if floodOther.Add(1) == 1 {
						t.Errorf("a flood request answered error %d (%v)", code, kerr.ErrorForCode(code))
					}
					time.Sleep(500 * time.Millisecond)
				}
			}
		})
	}
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
	t.Logf("outage: local topic %d acknowledged; flood sent %d MiB, %d refused KAFKA_STORAGE_ERROR, %d other errors; backlog peak %.1f MiB; RSS %d -> peak %d MiB",
		localAcked.Load(), floodSent.Load()>>20, floodRefused.Load(), floodOther.Load(), maxPending/(1<<20), rssBefore>>20, maxRSS>>20)
	if localAcked.Load() < 20 {
		t.Errorf("the local topic's producer was acknowledged %d times in 6 s of outage, want one every 100 ms or so", localAcked.Load())
	}
	if floodRefused.Load() == 0 {
		t.Error("the flood was never refused KAFKA_STORAGE_ERROR: the backlog bound did not act")
	}
	if floodOther.Load() > 0 {
		t.Errorf("%d flood requests answered something other than a retriable error", floodOther.Load())
	}
	// The backlog holds at most the budget plus the batches admitted together just below it
	// (Admit is checked per batch before any is counted): one batch per flood request and
	// per numbered partition.
	if limit := float64(budget + (flooders+partitions)*floodBatch); maxPending > limit || maxPending < budget {
		t.Errorf("the backlog peaked at %.1f MiB, want at least the budget (16 MiB) and at most %.0f MiB", maxPending/(1<<20), limit/(1<<20))
	}
	// The node's memory grows by the backlog (its batches copied into commit objects), the
	// frames of the requests held, and the garbage collector's headroom over both; without the
	// bound the flood alone would add what it sent.
	if grown := maxRSS - rssBefore; grown > floodSent.Load()/2+64<<20 {
		t.Errorf("RSS grew by %d MiB in the outage, with %d MiB of flood sent", grown>>20, floodSent.Load()>>20)
	}

	// Back: the producers are acknowledged again.
	back := acked()
	waitFor(t, 20*time.Second, "the producers are acknowledged once the bucket is back", func() bool { return acked() > back })
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
	waitFor(t, 20*time.Second, "the producers are acknowledged by the restored node", func() bool { return acked() > atRestart })
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
