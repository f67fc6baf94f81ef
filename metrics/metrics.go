// Package metrics is Inlet's Prometheus metrics (client_golang, text format) and the HTTP
// listener that serves them with the health checks (--metrics-listen). Every name starts with
// inlet_; the process_* and go_* series are client_golang's own collectors. docs/metrics.md
// lists them all.
//
// What runs when:
//
//   - Per request, on the request path (Requests): the event loop counts a complete frame's
//     bytes and stamps its arrival; when the request is released (answered, or dropped with
//     its connection) its API's counter and latency histogram are updated; a reply's bytes are
//     counted when it is handed to the socket. The counters and histograms of every served API
//     are resolved once, at start-up, into arrays indexed by API key, and error counts are
//     atomic counters in an [API][error code] array, so an update is a few atomic adds: no
//     map lookup, no label hashing and no allocation (server's TestProducePathAllocatesNothing
//     pins the produce path at zero with metrics on). Error codes of a produce response are
//     counted from its partitions; those of every other API by walking the decoded response
//     for its ErrorCode fields (errors.go), as Kafka's AbstractResponse.errorCounts does.
//   - Per group commit, on the batch log's completer goroutine (Commits, a
//     batchlog.Observer): records, bytes and the group's latency, and each segment fdatasync.
//   - At scrape time only (the state collector, state.go, reading the log through the Log
//     interface and the server through Node): everything that is state rather
//     than an event — high watermarks and log starts, committed offsets and lag, the in-flight
//     budget, open connections, segment bytes, Pebble's metrics. Nothing on the produce path
//     keeps these up to date; a scrape reads them where they already are.
//
// Without --metrics-listen none of this exists: the server and the log test one nil pointer
// per hook and do nothing else. metrics names batchlog only for the catalog records and the
// Stats value that Log returns; it holds no *batchlog.Log.
//
// Files: metrics.go (the registry, build info, Watch), requests.go (per-request counters),
// errors.go (error codes of a response), commits.go (the log's observer), state.go (the
// scrape-time collector, Log and Node), http.go (the listener and health checks). No locks:
// counters are atomics, state is read at scrape time from its owners.
package metrics

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "inlet"

// Metrics is one node's registry and its parts.
type Metrics struct {
	Registry *prometheus.Registry
	Requests *Requests // the server's hooks (server.Config.Metrics)
	Commits  *Commits  // the batch log's observer (batchlog.Options.Observer)

	ready atomic.Bool
	// remote is the remote tier, once WatchRemote names it.
	remote atomic.Pointer[Remote]
	// lease is the bucket prefix's lease, once WatchLease names it.
	lease atomic.Pointer[Lease]
	// The node's role (role.go): standby tells of the writer while the node stands by.
	roleOnce      sync.Once
	standby       atomic.Pointer[func() string]
	takeovers     atomic.Uint64
	takeoverNanos atomic.Int64
}

// New builds the registry: the request and commit metrics for the API keys served (the
// server's SupportedAPIs), the process and Go runtime collectors, and inlet_build_info.
// The state collector joins once the log and the server exist (Watch).
func New(apiKeys []int16, version, commit string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{Registry: reg, Requests: NewRequests(reg, apiKeys), Commits: NewCommits(reg)}
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help:        "Always 1; the labels name the version, the commit and the Go version the binary was built from.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": goVersion},
	})
	info.Set(1)
	reg.MustRegister(info)
	return m
}

// Watch adds the scrape-time collector of the log's and the node's state.
func (m *Metrics) Watch(log Log, node Node) {
	m.Registry.MustRegister(newStateCollector(log, node))
}

// SetReady sets what /readyz answers: ready once recovery is done and the listeners are up,
// not ready again when draining starts.
func (m *Metrics) SetReady(ready bool) { m.ready.Store(ready) }

// Ready reports what /readyz answers.
func (m *Metrics) Ready() bool { return m.ready.Load() }
