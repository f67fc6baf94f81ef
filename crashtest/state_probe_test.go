package crashtest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Floods of client-made state against the real binary: producer ids (InitProducerId and one
// idempotent batch each), topics auto-created by Metadata requests, and group ids committing
// one offset each. A bystander producer connected before the flood must keep being answered
// (p99 under 1 s) and the node's RSS is sampled throughout; after the flood the node is
// restarted and its start-up time and RSS right after are reported.
//
// By default the floods run past small bounds set by flags (--max-concurrent-producer-ids,
// --max-partitions, --max-groups) and check that the bound's error is answered. With
// PROBE_MEASURE=1 they run at the sizes of PROBE_PRODUCERS, PROBE_TOPICS and PROBE_GROUPS
// (defaults 200,000, 100,000 and 100,000) against the node's defaults and only report what
// they saw: the probes of the bounds' measurements (PROBE_BIN names a binary to run instead of
// this tree's, for the figures before the bounds; PROBE_ARGS adds flags, such as
// --default-partitions 1 for a catalog of one-partition topics).

// Kafka's codes the floods expect, as numbers: the probe also runs against builds that
// predate them.
const (
	codeLeaderNotAvailable      = 5
	codePolicyViolation         = 44
	codeThrottlingQuotaExceeded = 89
)

type probeSize struct {
	measure                 bool
	producers, topics, grps int
}

func probeSizes() probeSize {
	if os.Getenv("PROBE_MEASURE") == "" {
		return probeSize{producers: 1500, topics: 120, grps: 1500}
	}
	env := func(k string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
		return def
	}
	return probeSize{measure: true, producers: env("PROBE_PRODUCERS", 200000), topics: env("PROBE_TOPICS", 100000), grps: env("PROBE_GROUPS", 100000)}
}

// probeNode starts the node for a probe, on the binary PROBE_BIN names if set, with the flags
// of PROBE_ARGS (space-separated) added.
func probeNode(t *testing.T, args ...string) *inlet {
	t.Helper()
	args = append(args, strings.Fields(os.Getenv("PROBE_ARGS"))...)
	if b := os.Getenv("PROBE_BIN"); b != "" {
		old := inletBin
		inletBin = b
		t.Cleanup(func() { inletBin = old })
	}
	return startInlet(t, args...)
}

// rssWatch samples a process's VmRSS every 50 ms.
type rssWatch struct {
	stop chan struct{}
	done chan struct{}
	peak atomic.Int64
}

func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func watchRSS(pid int) *rssWatch {
	w := &rssWatch{stop: make(chan struct{}), done: make(chan struct{})}
	w.peak.Store(procRSS(pid))
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				if r := procRSS(pid); r > w.peak.Load() {
					w.peak.Store(r)
				}
			}
		}
	}()
	return w
}

func (w *rssWatch) finish() int64 {
	close(w.stop)
	<-w.done
	return w.peak.Load()
}

// probeBystander produces one record at a time until stopped, keeping each latency.
type probeBystander struct {
	stop chan struct{}
	done chan struct{}
	lat  []time.Duration
	errs int
	last error
}

func startProbeBystander(t *testing.T, addr string) *probeBystander {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bystander"), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatalf("bystander's first produce: %v", err)
	}
	by := &probeBystander{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(by.done)
		defer cl.Close()
		for i := 0; ; i++ {
			select {
			case <-by.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			began := time.Now()
			err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr()
			cancel()
			by.lat = append(by.lat, time.Since(began))
			if err != nil {
				by.errs++
				by.last = err
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return by
}

func (by *probeBystander) finish(t *testing.T) {
	t.Helper()
	close(by.stop)
	<-by.done
	if len(by.lat) == 0 {
		t.Fatal("the bystander never produced")
	}
	sort.Slice(by.lat, func(i, j int) bool { return by.lat[i] < by.lat[j] })
	p99 := by.lat[len(by.lat)*99/100]
	t.Logf("bystander: %d produces, p50 %v, p99 %v, max %v, %d errors", len(by.lat), by.lat[len(by.lat)/2].Round(time.Microsecond), p99.Round(time.Microsecond), by.lat[len(by.lat)-1].Round(time.Microsecond), by.errs)
	if by.errs > 0 {
		t.Errorf("the bystander's produce failed %d times (last: %v)", by.errs, by.last)
	}
	if p99 >= time.Second {
		t.Errorf("the bystander's p99 is %v, want under 1 s", p99)
	}
}

// parallel runs n jobs over workers connections, each job(rc, i) returning a Kafka code,
// and counts the codes.
func parallel(t *testing.T, addr string, workers, n int, job func(rc *rawConn, i int) int16) map[int16]int {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		codes = map[int16]int{}
		wg    sync.WaitGroup
	)
	for range workers {
		rc := dialRaw(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := map[int16]int{}
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					break
				}
				mine[job(rc, i)]++
			}
			mu.Lock()
			for c, k := range mine {
				codes[c] += k
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return codes
}

// afterFlood restarts the node and reports the start-up time and the RSS right after.
func afterFlood(t *testing.T, n *inlet) {
	t.Helper()
	if st, _ := n.terminate(60 * time.Second); st == nil {
		t.Fatal("the node did not stop within 60 s")
	}
	began := time.Now()
	n.restart()
	took := time.Since(began)
	time.Sleep(200 * time.Millisecond)
	t.Logf("restart: ready in %v, RSS %d MiB right after", took.Round(time.Millisecond), procRSS(n.cmd.Process.Pid)>>20)
}

func TestProbeProducerIDFlood(t *testing.T) {
	sz := probeSizes()
	const bound = 1000
	var args []string
	if !sz.measure {
		args = []string{"--max-concurrent-producer-ids", strconv.Itoa(bound)}
	}
	n := probeNode(t, args...)
	rc := dialRaw(t, n.addr())
	if r := rc.roundTrip(createTopicsReq("flood", 1)).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create flood: %d", r.Topics[0].ErrorCode)
	}
	by := startProbeBystander(t, n.addr())
	rss := watchRSS(n.cmd.Process.Pid)
	began := time.Now()
	codes := parallel(t, n.addr(), 8, sz.producers, func(rc *rawConn, i int) int16 {
		pid, epoch := rc.initProducerID()
		resp := rc.roundTrip(produceRequest("flood", 0, idempotentBatch(pid, epoch, 0, 1, "p"))).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	})
	took := time.Since(began)
	by.finish(t)
	t.Logf("%d producer ids in %v: codes %v; peak RSS %d MiB", sz.producers, took.Round(time.Millisecond), codes, rss.finish()>>20)
	if !sz.measure {
		// The bystander holds one window.
		if codes[0] != bound-1 || codes[codeThrottlingQuotaExceeded] != sz.producers-(bound-1) {
			t.Errorf("codes %v; want %d accepted and the rest THROTTLING_QUOTA_EXCEEDED", codes, bound-1)
		}
	}
	afterFlood(t, n)
}

func TestProbeAutoCreateFlood(t *testing.T) {
	sz := probeSizes()
	const bound = 1000 // 16 partitions per auto-created topic: 62 topics, the bystander's included
	var args []string
	if !sz.measure {
		args = []string{"--max-partitions", strconv.Itoa(bound)}
	}
	n := probeNode(t, args...)
	by := startProbeBystander(t, n.addr())
	rss := watchRSS(n.cmd.Process.Pid)
	began := time.Now()
	const perRequest = 100
	reqs := (sz.topics + perRequest - 1) / perRequest
	var mu sync.Mutex
	codes := map[int16]int{}
	parallel(t, n.addr(), 8, reqs, func(rc *rawConn, i int) int16 {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(9)
		req.AllowAutoTopicCreation = true
		for j := i * perRequest; j < min((i+1)*perRequest, sz.topics); j++ {
			name := fmt.Sprintf("auto-%d", j)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = &name
			req.Topics = append(req.Topics, rt)
		}
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		mu.Lock()
		for _, tt := range resp.Topics {
			codes[tt.ErrorCode]++
		}
		mu.Unlock()
		return 0
	})
	took := time.Since(began)
	by.finish(t)
	t.Logf("%d topics named in %v: codes %v; peak RSS %d MiB", sz.topics, took.Round(time.Millisecond), codes, rss.finish()>>20)
	if !sz.measure {
		if codes[codeLeaderNotAvailable] != bound/16-1 || codes[codePolicyViolation] != sz.topics-(bound/16-1) {
			t.Errorf("codes %v; want %d created and the rest POLICY_VIOLATION", codes, bound/16-1)
		}
		rc := dialRaw(t, n.addr())
		if r := rc.roundTrip(createTopicsReq("big", 10000)).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != codePolicyViolation {
			t.Errorf("CreateTopics of 10,000 partitions past the bound: error %d", r.Topics[0].ErrorCode)
		}
	}
	// The all-topics Metadata reply of the catalog the flood left.
	rc := dialRaw(t, n.addr())
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	req.Topics = nil
	frame, _ := rc.encode(req)
	_ = rc.c.SetDeadline(time.Now().Add(time.Minute))
	began = time.Now()
	if _, err := rc.c.Write(frame); err != nil {
		t.Fatal(err)
	}
	body, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all-topics Metadata reply: %d bytes in %v", len(body), time.Since(began).Round(time.Microsecond))
	afterFlood(t, n)
}

func TestProbeGroupFlood(t *testing.T) {
	sz := probeSizes()
	const bound = 1000
	var args []string
	if !sz.measure {
		args = []string{"--max-groups", strconv.Itoa(bound)}
	}
	n := probeNode(t, args...)
	by := startProbeBystander(t, n.addr())
	rss := watchRSS(n.cmd.Process.Pid)
	began := time.Now()
	codes := parallel(t, n.addr(), 8, sz.grps, func(rc *rawConn, i int) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		req.Group, req.Generation = fmt.Sprintf("g-%d", i), -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "bystander"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	})
	took := time.Since(began)
	by.finish(t)
	t.Logf("%d group ids in %v: codes %v; peak RSS %d MiB", sz.grps, took.Round(time.Millisecond), codes, rss.finish()>>20)
	if !sz.measure && (codes[0] != bound || codes[codePolicyViolation] != sz.grps-bound) {
		t.Errorf("codes %v; want %d committed and the rest POLICY_VIOLATION", codes, bound)
	}
	afterFlood(t, n)
}

func createTopicsReq(name string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(4)
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	return req
}
