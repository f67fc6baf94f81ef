package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/loadgen"
)

// metricsAddr is the address the current start's metrics listener bound (--metrics-listen
// 127.0.0.1:0 lets the kernel pick the port, so no second port can be lost to a race).
func (n *inlet) metricsAddr() string {
	n.t.Helper()
	n.waitLogged(`msg="metrics listening"`, 5*time.Second)
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		n.t.Fatal(err)
	}
	marker := fmt.Sprintf("===== crashtest: start %d ", n.starts)
	b = b[strings.LastIndex(string(b), marker):]
	m := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`).FindSubmatch(b)
	if m == nil {
		n.t.Fatal("no metrics listener address in the log")
	}
	return string(m[1])
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := httpClient.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, b
}

// scrape reads addr's /metrics into series (name{labels}, labels sorted by name as the text
// format writes them) and their values; a histogram gives its _count and _sum.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: HTTP %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v", err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			suffix := ""
			if len(labels) > 0 {
				suffix = "{" + strings.Join(labels, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[name+suffix] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+suffix] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+suffix] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+suffix] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// TestMetricsEndpoint: after a produce, the main series of /metrics exist with the values the
// traffic implies (requests and errors by API, records and bytes, fsyncs, high watermarks,
// committed offsets and lag, connections, the budget, Pebble, the runtime); /healthz and
// /readyz answer 200 on a ready node; pprof is not served without --pprof.
func TestMetricsEndpoint(t *testing.T) {
	n := startInlet(t, "--metrics-listen", "127.0.0.1:0")
	maddr := n.metricsAddr()
	for _, c := range []struct {
		path string
		want int
	}{{"/healthz", 200}, {"/readyz", 200}, {"/debug/pprof/", 404}, {"/debug/pprof/heap", 404}} {
		if code, body := httpGet(t, "http://"+maddr+c.path); code != c.want {
			t.Errorf("%s: HTTP %d, want %d (%q)", c.path, code, c.want, body)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.DefaultProduceTopic("metrics"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "metrics"); err != nil {
		t.Fatal(err)
	}
	const records = 200
	var rs []*kgo.Record
	for i := 0; i < records; i++ {
		rs = append(rs, &kgo.Record{Value: []byte(strings.Repeat("v", 100))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// One error of each kind of path: a produce to a partition that does not exist (counted
	// from the produce response's partitions), and a DeleteTopics of a topic that does not
	// (counted from the decoded response).
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "metrics"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 99, make([]byte, 61)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 3 {
		t.Fatalf("produce to partition 99: %v, %+v", err, resp)
	}
	if _, err := adm.DeleteTopics(ctx, "no-such-topic"); err != nil {
		t.Fatal(err)
	}
	// A committed offset: 10 records behind partition 0's high watermark (50).
	offs := kadm.Offsets{}
	offs.AddOffset("metrics", 0, 40, -1)
	if _, err := adm.CommitOffsets(ctx, "watchers", offs); err != nil {
		t.Fatal(err)
	}

	got := scrape(t, maddr)
	exact := map[string]float64{
		`inlet_group_commit_records_total`:                                                                   records,
		`inlet_partition_high_watermark{partition="0",topic="metrics"}`:                                      records / 4,
		`inlet_partition_log_start_offset{partition="0",topic="metrics"}`:                                    0,
		`inlet_group_committed_offset{group="watchers",partition="0",topic="metrics"}`:                       40,
		`inlet_group_lag{group="watchers",partition="0",topic="metrics"}`:                                    records/4 - 40,
		`inlet_request_errors_total{api="Produce",error="UNKNOWN_TOPIC_OR_PARTITION"}`:                       1,
		`inlet_request_errors_total{api="DeleteTopics",error="UNKNOWN_TOPIC_OR_PARTITION"}`:                  1,
		`inlet_inflight_budget_limit_bytes`:                                                                  256 << 20,
		`inlet_build_info{commit="` + buildCommit(got) + `",goversion="` + buildGo(got) + `",version="dev"}`: 1,
	}
	for name, want := range exact {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %t), want %v", name, v, ok, want)
		}
	}
	positive := []string{
		`inlet_requests_total{api="Produce"}`, `inlet_requests_total{api="Metadata"}`, `inlet_requests_total{api="ApiVersions"}`,
		`inlet_request_duration_seconds_count{api="Produce"}`, `inlet_request_duration_seconds_sum{api="Produce"}`,
		`inlet_network_received_bytes_total`, `inlet_network_sent_bytes_total`,
		`inlet_group_commits_total`, `inlet_group_commit_duration_seconds_count`,
		`inlet_fsync_duration_seconds_count`, `inlet_fsync_duration_seconds_sum`,
		`inlet_connections{listener="PLAINTEXT"}`, `inlet_segment_files`, `inlet_segment_bytes`,
		`inlet_pebble_disk_bytes`, `inlet_pebble_wal_fsync_duration_seconds_count`,
		`process_cpu_seconds_total`, `process_resident_memory_bytes`, `go_goroutines`,
	}
	for _, name := range positive {
		if got[name] <= 0 {
			t.Errorf("%s = %v, want > 0", name, got[name])
		}
	}
	for _, name := range []string{`inlet_inflight_budget_used_bytes`, `inlet_pebble_compaction_debt_bytes`, `inlet_pebble_write_stalls_total`, `inlet_protocol_errors_total`} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if b := got[`inlet_group_commit_bytes_total`]; b < records*100 {
		t.Errorf("inlet_group_commit_bytes_total = %v, want at least the %d value bytes produced", b, records*100)
	}
	if got[`inlet_segment_bytes`] < got[`inlet_group_commit_bytes_total`] {
		t.Errorf("segment bytes %v below the record bytes committed %v", got[`inlet_segment_bytes`], got[`inlet_group_commit_bytes_total`])
	}
	// Every produce request waited for a group commit: its latency includes a sync.
	if p, s := got[`inlet_request_duration_seconds_sum{api="Produce"}`], got[`inlet_request_duration_seconds_count{api="Produce"}`]; p/s > 10 {
		t.Errorf("mean produce latency %vs", p/s)
	}
}

// TestPprofWithoutMetricsListenExits: --pprof has no listener of its own, so asking for it
// without --metrics-listen stops start-up rather than being ignored.
func TestPprofWithoutMetricsListenExits(t *testing.T) {
	cmd := exec.Command(inletBin, "--pprof", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "--metrics-listen") {
		t.Errorf("the message does not name --metrics-listen:\n%s", out)
	}
}

// buildCommit and buildGo read inlet_build_info's labels back (the commit depends on how the
// test binary was built).
func buildCommit(got map[string]float64) string { return buildLabel(got, "commit") }
func buildGo(got map[string]float64) string     { return buildLabel(got, "goversion") }

func buildLabel(got map[string]float64, label string) string {
	for k := range got {
		if strings.HasPrefix(k, "inlet_build_info{") {
			if m := regexp.MustCompile(label + `="([^"]*)"`).FindStringSubmatch(k); m != nil {
				return m[1]
			}
		}
	}
	return "?"
}

// prometheusServer is a real Prometheus (Debian's package) scraping one node.
type prometheusServer struct {
	t    *testing.T
	addr string
}

// startPrometheus runs prometheus scraping target every second, on a fresh storage directory
// and a free loopback port, until the test ends. Without the binary the test is skipped,
// except in CI (CI=true), where scripts/setup.sh installs it and its absence is a failure.
func startPrometheus(t *testing.T, target string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not on PATH: scripts/setup.sh installs it (Debian package prometheus)")
		}
		t.Skip("prometheus is not on PATH (Debian package prometheus; scripts/setup.sh installs it, CI requires it)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	// scrape_timeout must not exceed the interval.
	yml := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: inlet\n    static_configs:\n      - targets: ['%s']\n", target)
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "prometheus.log")
	for attempt := 1; attempt <= 3; attempt++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data%d", attempt)),
			"--web.listen-address="+addr, "--log.level=warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatal(err)
		}
		logf.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		ready := false
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			select {
			case <-exited:
			default:
				if resp, err := httpClient.Get("http://" + addr + "/-/ready"); err == nil {
					resp.Body.Close()
					ready = resp.StatusCode == 200
				}
				if !ready {
					continue
				}
			}
			break
		}
		if ready {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					b, _ := os.ReadFile(logPath)
					t.Logf("prometheus log:\n%s", b)
				}
			})
			t.Logf("prometheus (pid %d) ready on %s", cmd.Process.Pid, addr)
			return &prometheusServer{t: t, addr: addr}
		}
		stop()
		t.Logf("prometheus start attempt %d on %s failed", attempt, addr)
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("prometheus did not become ready:\n%s", b)
	return nil
}

// query evaluates an instant PromQL query at time at (zero: now) and returns the value of
// each series by its labels as Prometheus prints them (an empty map when none matched).
func (p *prometheusServer) query(q string, at time.Time) map[string]float64 {
	p.t.Helper()
	v := url.Values{"query": {q}}
	if !at.IsZero() {
		v.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	code, body := httpGet(p.t, "http://"+p.addr+"/api/v1/query?"+v.Encode())
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || code != 200 || r.Status != "success" {
		p.t.Fatalf("query %q: HTTP %d, %v: %s", q, code, err, body)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			p.t.Fatalf("query %q: value %v", q, s.Value)
		}
		out[fmt.Sprint(s.Metric)] = f
	}
	return out
}

// scalar is the value of a query that must return exactly one series.
func (p *prometheusServer) scalar(q string, at time.Time) float64 {
	p.t.Helper()
	r := p.query(q, at)
	if len(r) != 1 {
		p.t.Fatalf("query %q returned %d series: %v", q, len(r), r)
	}
	for _, v := range r {
		return v
	}
	return 0
}

// TestPrometheusScrapesProduceRate: a real Prometheus scrapes a node every second while the
// load generator produces for a few seconds. Prometheus's produce rate in the middle of the
// load agrees with the load generator's, the records counter ends equal to the records the
// load generator had acknowledged, and the fsync histogram has samples and a sane 99th
// percentile. The node runs with --pprof, which serves the profiles.
func TestPrometheusScrapesProduceRate(t *testing.T) {
	n := startInlet(t, "--metrics-listen", "127.0.0.1:0", "--pprof")
	maddr := n.metricsAddr()
	if code, _ := httpGet(t, "http://"+maddr+"/debug/pprof/cmdline"); code != 200 {
		t.Errorf("/debug/pprof/cmdline with --pprof: HTTP %d", code)
	}
	prom := startPrometheus(t, maddr)
	waitFor(t, 20*time.Second, "Prometheus scrapes the node", func() bool {
		r := prom.query(`up{job="inlet"}`, time.Time{})
		for _, v := range r {
			return v == 1
		}
		return false
	})

	// Idempotent producers at a fixed rate: every acknowledged record is committed exactly
	// once, so the broker's counter must end equal to what the load generator counts.
	const loadFor = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := loadgen.Run(ctx, loadgen.Config{
		Brokers: []string{n.addr()}, Topic: "scraped", Partitions: 4, Producers: 4,
		Idempotent: true, Duration: loadFor, Rate: 20_000, FlushTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("loadgen: %v", err)
	}
	if res.Failed > 0 || res.Unresolved > 0 || res.Acked == 0 {
		t.Fatalf("loadgen: acked %d, failed %d, unresolved %d: %v", res.Acked, res.Failed, res.Unresolved, res.Errors)
	}
	t.Logf("loadgen: %d records acknowledged in %v, %.0f records/s", res.Acked, res.Elapsed.Round(time.Millisecond), res.RecordsPerSec)

	// The counter's total, from a scrape after the last ack.
	var total float64
	waitFor(t, 15*time.Second, "Prometheus's records total reaches the acknowledged records", func() bool {
		total = prom.scalar(`inlet_group_commit_records_total`, time.Time{})
		return total >= float64(res.Acked)
	})
	if total != float64(res.Acked) {
		t.Errorf("inlet_group_commit_records_total = %v, want the %d records acknowledged", total, res.Acked)
	}
	if b := prom.scalar(`inlet_group_commit_bytes_total`, time.Time{}); b < float64(res.Bytes) {
		t.Errorf("inlet_group_commit_bytes_total = %v, below the %d value bytes acknowledged", b, res.Bytes)
	}

	// The rate over three seconds of steady sending (from the first second to the last, so
	// that a late scrape still leaves two samples in the window), against the load
	// generator's average: scrape timing and a loaded machine's jitter allow a factor of two
	// either way.
	mid := res.Start.Add(res.SendElapsed - time.Second)
	rate := prom.scalar(`rate(inlet_group_commit_records_total[3s])`, mid)
	if rate < res.RecordsPerSec/2 || rate > res.RecordsPerSec*2 {
		t.Errorf("Prometheus's produce rate at mid-load %.0f records/s, the load generator's %.0f", rate, res.RecordsPerSec)
	}
	t.Logf("Prometheus: produce rate at mid-load %.0f records/s (loadgen %.0f); total %v", rate, res.RecordsPerSec, total)

	// The fsync histogram: samples during the load, and a 99th percentile that is a time
	// (at most the histogram's largest finite bound, 1.6 s).
	syncs := prom.scalar(`inlet_fsync_duration_seconds_count`, time.Time{})
	groups := prom.scalar(`inlet_group_commits_total`, time.Time{})
	if syncs <= 0 || syncs > groups {
		t.Errorf("fsyncs %v for %v group commits: want at least one, and no more than one a group", syncs, groups)
	}
	p99 := prom.scalar(`histogram_quantile(0.99, rate(inlet_fsync_duration_seconds_bucket[3s]))`, mid)
	if math.IsNaN(p99) || p99 <= 0 || p99 > 2 {
		t.Errorf("fsync p99 at mid-load %v s", p99)
	}
	produceP99 := prom.scalar(`histogram_quantile(0.99, rate(inlet_request_duration_seconds_bucket{api="Produce"}[3s]))`, mid)
	t.Logf("Prometheus: fsync p99 %.2f ms, produce request p99 %.2f ms, %v fsyncs for %v groups", p99*1e3, produceP99*1e3, syncs, groups)
}

// waitFor polls cond every 200 ms until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
	}
}
