package metrics

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestBuckets are the request latency histogram's upper bounds in seconds: a produce
// request waits for its group's fsync (a few hundred microseconds on an NVMe disk, tens of
// milliseconds on a slow one), a long-polled Fetch for up to its MaxWaitMs.
var requestBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Error codes are counted in a fixed array: Kafka's codes run from -1 up (136 in Kafka 4.1);
// slot code+1 holds code, the last slot every code beyond (none is ever answered).
const (
	maxErrorCode = 159
	errorSlots   = maxErrorCode + 3
	otherSlot    = errorSlots - 1
)

// Requests are the request path's metrics; see the package comment for what runs when. The
// methods are safe from any goroutine; none allocates.
type Requests struct {
	dense    [kmsg.MaxKey + 1]int8 // API key -> index into the slices below; -1: not served
	keys     []int16               // the served keys, by index
	requests []prometheus.Counter
	latency  []prometheus.Observer
	errs     [][errorSlots]atomic.Uint64

	bytesIn, bytesOut prometheus.Counter
	fetchWakeups      prometheus.Counter

	errDesc *prometheus.Desc

	listeners *listenerMetrics // listeners.go
	limits    limitsCollector  // limits.go
}

// NewRequests registers the request metrics with reg, resolving the children of every key in
// apiKeys once.
func NewRequests(reg prometheus.Registerer, apiKeys []int16) *Requests {
	count := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "requests_total",
		Help: "Requests handled, by API (answered, or refused with their connection closed). A request dropped unread because its connection closed first is not counted; one refused before its API is known (a bad header, an unsupported version) is an inlet_protocol_errors_total.",
	}, []string{"api"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "request_duration_seconds",
		Help:    "Time from a request's last byte arriving to its reply being queued for the socket, by API: for Produce, the wait for its group's fsync included; for Fetch, its long poll.",
		Buckets: requestBuckets,
	}, []string{"api"})
	m := &Requests{
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "network_received_bytes_total",
			Help: "Bytes of complete request frames read from client connections, length prefixes included.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "network_sent_bytes_total",
			Help: "Bytes of replies handed to client connections.",
		}),
		fetchWakeups: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "fetch_wakeups_total",
			Help: "Parked Fetch long polls woken by a high-watermark advance of a partition they read, each of which builds its answer again.",
		}),
		errDesc: prometheus.NewDesc(namespace+"_request_errors_total",
			"Error codes answered, by API and Kafka error name: a request's top-level error and each topic's and partition's (as Kafka's ErrorsPerSec counts them). A series appears with its first error.",
			[]string{"api", "error"}, nil),
	}
	for i := range m.dense {
		m.dense[i] = -1
	}
	for _, k := range apiKeys {
		if k < 0 || int(k) >= len(m.dense) || len(m.keys) == 127 {
			panic(fmt.Sprintf("BUG: metrics: api key %d cannot be counted", k))
		}
		if m.dense[k] >= 0 {
			continue
		}
		name := apiName(k)
		m.dense[k] = int8(len(m.keys))
		m.keys = append(m.keys, k)
		m.requests = append(m.requests, count.WithLabelValues(name))
		m.latency = append(m.latency, latency.WithLabelValues(name))
	}
	m.errs = make([][errorSlots]atomic.Uint64, len(m.keys))
	reg.MustRegister(count, latency, m.bytesIn, m.bytesOut, m.fetchWakeups, (*requestErrors)(m))
	m.listeners = newListenerMetrics(reg)
	reg.MustRegister(&m.limits)
	return m
}

func apiName(k int16) string {
	if n := kmsg.NameForKey(k); n != "" {
		return n
	}
	return strconv.Itoa(int(k))
}

// index is k's slot, or -1 for a key that is not served.
func (m *Requests) index(k int16) int {
	if k < 0 || int(k) >= len(m.dense) {
		return -1
	}
	return int(m.dense[k])
}

// Received counts a complete request frame of n bytes.
func (m *Requests) Received(n int) { m.bytesIn.Add(float64(n)) }

// Sent counts n bytes of replies handed to a connection.
func (m *Requests) Sent(n int) { m.bytesOut.Add(float64(n)) }

// FetchWoken counts a parked Fetch woken by an advance of one of its partitions.
func (m *Requests) FetchWoken() { m.fetchWakeups.Inc() }

// Done counts one request of API key, d after its last byte arrived.
func (m *Requests) Done(key int16, d time.Duration) {
	if i := m.index(key); i >= 0 {
		m.requests[i].Inc()
		m.latency[i].Observe(d.Seconds())
	}
}

// Error counts one error code answered for API key; ErrNone (0) is not an error.
func (m *Requests) Error(key, code int16) {
	i := m.index(key)
	if i < 0 || code == 0 {
		return
	}
	slot := int(code) + 1
	if code < -1 || code > maxErrorCode {
		slot = otherSlot
	}
	m.errs[i][slot].Add(1)
}

// ResponseErrors counts every error code in resp, a decoded response of API key (errors.go).
func (m *Requests) ResponseErrors(key int16, resp kmsg.Response) {
	if m.index(key) < 0 || resp == nil {
		return
	}
	eachErrorCode(resp, func(code int16) { m.Error(key, code) })
}

// requestErrors exports Requests' error counts: only the pairs that have happened.
type requestErrors Requests

func (e *requestErrors) Describe(ch chan<- *prometheus.Desc) { ch <- e.errDesc }

func (e *requestErrors) Collect(ch chan<- prometheus.Metric) {
	for i, k := range e.keys {
		api := apiName(k)
		for slot := range e.errs[i] {
			if n := e.errs[i][slot].Load(); n > 0 {
				ch <- prometheus.MustNewConstMetric(e.errDesc, prometheus.CounterValue, float64(n), api, errorName(slot))
			}
		}
	}
}

// errorName is the Kafka name of the error code counted in slot (UNKNOWN_TOPIC_OR_PARTITION),
// or its number when franz-go's kerr does not know it.
func errorName(slot int) string {
	if slot == otherSlot {
		return "OTHER"
	}
	code := int16(slot - 1)
	if e := kerr.TypedErrorForCode(code); e != nil && e.Code == code {
		return e.Message
	}
	return strconv.Itoa(int(code))
}
