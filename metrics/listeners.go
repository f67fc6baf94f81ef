package metrics

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inlet/wire"
)

// listenerMetrics are the acceptors' (transport/accept.go): accept errors, whether each
// listener is serving, and the time KIP-612's connection rate made them wait; and, read at
// scrape time, what of wire's decompression budget is held. Told by the
// transport as things happen (rarely: an accept error, a change of state, a throttle); the
// serving state also decides /readyz.
type listenerMetrics struct {
	acceptErrs *prometheus.CounterVec
	serving    *prometheus.GaugeVec
	throttled  prometheus.Counter

	mu   sync.Mutex
	down map[string]string // listeners not serving, and their last accept error
}

func newListenerMetrics(reg prometheus.Registerer) *listenerMetrics {
	l := &listenerMetrics{
		acceptErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "listener_accept_errors_total",
			Help: "Accept errors by listener (too many open files, and others): the listener goes on accepting, and the connection that could not be accepted is closed at once where a reserved descriptor allows.",
		}, []string{"listener"}),
		serving: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "listener_serving",
			Help: "1 while a listener accepts connections, 0 while accepting fails (descriptors exhausted) or after it stopped; /readyz fails while any is 0.",
		}, []string{"listener"}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "connection_accept_throttle_seconds_total",
			Help: "Time the acceptors waited for max.connection.creation.rate (KIP-612) before accepting.",
		}),
		down: map[string]string{},
	}
	reg.MustRegister(l.acceptErrs, l.serving, l.throttled, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "decompression_budget_held_bytes",
		Help: "Bytes of the node-wide decompression budget (64 MiB) held now by decompressors and whole decompressed batches; a compressed batch waits while it is spent.",
	}, func() float64 { return float64(wire.InflateBudgetHeld()) }))
	return l
}

// ListenerEvent is the transport's Config.ListenerEvent: err nil when listener starts or
// serves again, an accept error otherwise (the listener is not serving until told nil).
func (m *Requests) ListenerEvent(listener string, err error) {
	l := m.listeners
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		delete(l.down, listener)
		l.serving.WithLabelValues(listener).Set(1)
		return
	}
	l.down[listener] = err.Error()
	l.serving.WithLabelValues(listener).Set(0)
	l.acceptErrs.WithLabelValues(listener).Inc()
}

// AcceptThrottled is the transport's Config.AcceptThrottled.
func (m *Requests) AcceptThrottled(d time.Duration) { m.listeners.throttled.Add(d.Seconds()) }

// listenersDown names the listeners not serving and why ("" when every one serves).
func (m *Requests) listenersDown() string {
	l := m.listeners
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.down) == 0 {
		return ""
	}
	var out []string
	for name, err := range l.down {
		out = append(out, "listener "+name+" not accepting: "+err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
