package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/groups"
	"inlet/httplimit"
	"inlet/httplimit/limittest"
)

// TestResponseErrorsCountsEveryLevel: a response's error codes are counted at every level
// (top, topic, partition), zeros are not errors, and a type is walked the same way twice
// (from its cached plan).
func TestResponseErrorsCountsEveryLevel(t *testing.T) {
	resp := kmsg.NewPtrMetadataResponse()
	for _, code := range []int16{0, 3, 3} {
		mt := kmsg.NewMetadataResponseTopic()
		mt.ErrorCode = code
		for _, pc := range []int16{0, 5} {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.ErrorCode = pc
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	for range 2 {
		var got []int16
		eachErrorCode(resp, func(c int16) { got = append(got, c) })
		// Topic codes 3, 3 and each topic's partition code 5, in field order.
		if want := []int16{5, 3, 5, 3, 5}; !equal(got, want) {
			t.Fatalf("error codes %v, want %v", got, want)
		}
	}
	top := kmsg.NewPtrApiVersionsResponse()
	top.ErrorCode = 35
	var got []int16
	eachErrorCode(top, func(c int16) { got = append(got, c) })
	if !equal(got, []int16{35}) {
		t.Fatalf("ApiVersions: %v, want [35]", got)
	}
	eachErrorCode((*kmsg.MetadataResponse)(nil), func(int16) { t.Fatal("a nil response has codes") })
}

func equal(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRequestsCountByAPIAndError: requests and latencies by API, error codes by API and
// Kafka name (a code beyond every known one as OTHER), unserved keys ignored.
func TestRequestsCountByAPIAndError(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRequests(reg, []int16{0, 3, 18})
	r.Done(0, time.Millisecond)
	r.Done(0, 2*time.Millisecond)
	r.Done(3, time.Millisecond)
	r.Done(42, time.Millisecond) // not served: ignored
	r.Error(0, 0)                // not an error
	r.Error(0, 87)               // INVALID_RECORD
	r.Error(0, 87)
	r.Error(3, 3)
	r.Error(18, 35)
	r.Error(18, 999)
	r.Error(42, 3)
	r.Received(100)
	r.Sent(40)
	want := `
# HELP inlet_request_errors_total Error codes answered, by API and Kafka error name: a request's top-level error and each topic's and partition's (as Kafka's ErrorsPerSec counts them). A series appears with its first error.
# TYPE inlet_request_errors_total counter
inlet_request_errors_total{api="ApiVersions",error="OTHER"} 1
inlet_request_errors_total{api="ApiVersions",error="UNSUPPORTED_VERSION"} 1
inlet_request_errors_total{api="Metadata",error="UNKNOWN_TOPIC_OR_PARTITION"} 1
inlet_request_errors_total{api="Produce",error="INVALID_RECORD"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inlet_request_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(r.requests[r.index(0)]); n != 2 {
		t.Errorf("Produce requests %v, want 2", n)
	}
	if n := testutil.CollectAndCount(reg, "inlet_requests_total"); n != 3 {
		t.Errorf("%d request series, want one per served API (3)", n)
	}
	if in, out := testutil.ToFloat64(r.bytesIn), testutil.ToFloat64(r.bytesOut); in != 100 || out != 40 {
		t.Errorf("bytes in %v, out %v; want 100, 40", in, out)
	}
}

// TestRequestHooksAllocateNothing: what the produce path calls, with the children resolved at
// start-up.
func TestRequestHooksAllocateNothing(t *testing.T) {
	r := NewRequests(prometheus.NewRegistry(), []int16{0, 1})
	c := NewCommits(prometheus.NewRegistry())
	if n := testing.AllocsPerRun(1000, func() {
		r.Received(1000)
		r.Error(0, 87)
		r.Done(0, time.Millisecond)
		r.Sent(100)
		c.GroupDurable(100, 10000, time.Millisecond)
		c.Synced(time.Millisecond)
	}); n != 0 {
		t.Fatalf("%v allocations per request, want 0", n)
	}
}

// fakeNode is a Node with fixed answers.
type fakeNode struct{ offsets []groups.CommittedOffset }

func (fakeNode) InflightBudget() (int64, int64) { return 4096, 1 << 20 }
func (fakeNode) OpenConnections() map[string]int {
	return map[string]int{"PLAINTEXT": 2, "SASL_SSL": 0}
}
func (fakeNode) Refusals() map[string]int64                   { return map[string]int64{"bad request size": 1} }
func (fakeNode) ProtocolErrors() int64                        { return 1 }
func (n fakeNode) CommittedOffsets() []groups.CommittedOffset { return n.offsets }
func (fakeNode) Transactions() (map[string]int, map[string]int64) {
	return map[string]int{"Ongoing": 1}, map[string]int64{"commit": 2, "abort": 0, "timeout": 0}
}

// TestStateIsReadAtScrape: high watermarks, log starts, committed offsets and lag, the
// budget, connections, segment and Pebble metrics come from where they are at scrape time,
// and the whole registry passes client_golang's metric lint (names, units, _total).
func TestStateIsReadAtScrape(t *testing.T) {
	m := New([]int16{0}, "test", "abc")
	log, err := batchlog.Open(batchlog.Options{Dir: t.TempDir(), Observer: m.Commits, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	tp, err := log.CreateTopic("orders", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	log.Submit(&batchlog.Request{
		Appends: []batchlog.Append{{Partition: tp.Partitions[1], Batch: testBatch(5), ProducerID: -1, NumRecords: 5}},
		Done:    func(*batchlog.Request) { close(done) },
	})
	<-done
	m.Watch(log, fakeNode{offsets: []groups.CommittedOffset{
		{Group: "g", Topic: "orders", Partition: 1, Offset: 2},
		{Group: "g", Topic: "orders", Partition: 0, Offset: 7}, // past the high watermark: lag 0
		{Group: "g", Topic: "gone", Partition: 0, Offset: 1},   // no such topic: no lag
	}})
	want := `
# HELP inlet_partition_high_watermark The offset after the last durable record of each partition.
# TYPE inlet_partition_high_watermark gauge
inlet_partition_high_watermark{partition="0",topic="orders"} 0
inlet_partition_high_watermark{partition="1",topic="orders"} 5
# HELP inlet_group_lag Records between a group's committed offset and the partition's high watermark (0 when the commit is at or past it).
# TYPE inlet_group_lag gauge
inlet_group_lag{group="g",partition="0",topic="orders"} 0
inlet_group_lag{group="g",partition="1",topic="orders"} 3
# HELP inlet_connections Open client connections, by listener.
# TYPE inlet_connections gauge
inlet_connections{listener="PLAINTEXT"} 2
inlet_connections{listener="SASL_SSL"} 0
# HELP inlet_inflight_budget_used_bytes Bytes of requests read and not yet answered (for produce: not yet durable), as the capacity of the buffers holding them (--inflight-budget).
# TYPE inlet_inflight_budget_used_bytes gauge
inlet_inflight_budget_used_bytes 4096
# HELP inlet_group_commit_records_total Records appended by durable group commits: what producers were acknowledged for, each record once (an idempotent producer's resent duplicate appends nothing).
# TYPE inlet_group_commit_records_total counter
inlet_group_commit_records_total 5
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "inlet_partition_high_watermark", "inlet_group_lag", "inlet_connections", "inlet_inflight_budget_used_bytes", "inlet_group_commit_records_total"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"inlet_group_committed_offset", "inlet_segment_bytes", "inlet_segment_files", "inlet_segment_relocated_bytes_total", "inlet_writes_suspended", "inlet_pebble_compaction_debt_bytes",
		"inlet_pebble_write_stalls_total", "inlet_partition_last_stable_offset", "inlet_transactions", "inlet_transactions_ended_total", "inlet_pebble_wal_fsync_duration_seconds", "inlet_fsync_duration_seconds", "inlet_build_info",
		"process_cpu_seconds_total", "go_goroutines"} {
		if testutil.CollectAndCount(m.Registry, name) == 0 {
			t.Errorf("no %s series", name)
		}
	}
	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// testBatch is a record-batch-shaped value of n records: the log looks only at its header.
func testBatch(n int32) []byte {
	b := make([]byte, 62)
	for i := 43; i < 51; i++ {
		b[i] = 0xff // producer id -1
	}
	b[16] = 2
	b[26] = byte(n - 1)
	b[60] = byte(n)
	return b
}

// TestHealthReadyAndPprof: /healthz is 200 from the start, /readyz 503 until SetReady, and
// /debug/pprof/ exists only when asked for.
func TestHealthReadyAndPprof(t *testing.T) {
	m := New([]int16{0}, "test", "")
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	h := m.Handler(false)
	if code, _ := get(h, "/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := get(h, "/readyz"); code != 503 {
		t.Errorf("/readyz before ready: %d, want 503", code)
	}
	m.SetReady(true)
	if code, _ := get(h, "/readyz"); code != 200 {
		t.Errorf("/readyz when ready: %d, want 200", code)
	}
	m.SetReady(false)
	if code, _ := get(h, "/readyz"); code != 503 {
		t.Errorf("/readyz when draining: %d, want 503", code)
	}
	if code, body := get(h, "/metrics"); code != 200 || !strings.Contains(body, `inlet_build_info{commit="",goversion=`) {
		t.Errorf("/metrics: %d\n%.300s", code, body)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, _ := get(h, p); code != 404 {
			t.Errorf("%s without pprof: %d, want 404", p, code)
		}
	}
	hp := m.Handler(true)
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, _ := get(hp, p); code != 200 {
			t.Errorf("%s with pprof: %d, want 200", p, code)
		}
	}
}

// TestServeAndClose: the listener serves on a loopback port and Close stops it.
func TestServeAndClose(t *testing.T) {
	m := New(nil, "test", "")
	s, err := Serve("127.0.0.1:0", m.Handler(false))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get("http://" + s.Addr() + "/healthz"); err == nil {
		t.Fatal("still serving after Close")
	}
}

// TestLabelsAreMadeValidUTF8: a group id that is not UTF-8 (Kafka accepts any string) is
// exported with U+FFFD in place of its bad bytes, not a failed scrape.
func TestLabelsAreMadeValidUTF8(t *testing.T) {
	got := validLabels([]string{"ok", "fz\xff"})
	if got[0] != "ok" || got[1] != "fz\uFFFD" {
		t.Fatalf("labels %q", got)
	}
}

// TestMetricsConnectionLimits: the metrics listener closes idle connections and serves at most
// MaxConns connections at once (the others wait), and a CPU profile may still run longer than
// the write timeout (Profiling). It used to set only a header timeout.
func TestMetricsConnectionLimits(t *testing.T) {
	m := New(nil, "test", "")
	lim := httplimit.Limits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, IdleTimeout: 700 * time.Millisecond, MaxConns: 2, Longer: Profiling}
	s, err := ServeWith("127.0.0.1:0", m.Handler(true), lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(t.Context()) })
	t.Run("idle", func(t *testing.T) { limittest.IdleIsClosed(t, s.Addr(), "/healthz", lim.IdleTimeout) })
	t.Run("cap", func(t *testing.T) { limittest.ConnsPastTheCapWait(t, s.Addr(), "/healthz", lim.MaxConns) })
	t.Run("profile longer than the timeouts", func(t *testing.T) {
		began := time.Now()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + s.Addr() + "/debug/pprof/profile?seconds=2")
		if err != nil {
			t.Fatalf("a 2 s CPU profile with 0.5 s timeouts: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(body) == 0 || time.Since(began) < 1900*time.Millisecond {
			t.Fatalf("a 2 s CPU profile: %s, %d bytes, %v, after %v", resp.Status, len(body), err, time.Since(began))
		}
	})
}
