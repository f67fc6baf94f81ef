package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The node's role on its bucket prefix: the writer (WatchLease), or a standby waiting for it
// (StandingBy), and the takeovers from one to the other (TookOver). One collector, registered
// by whichever comes first, tells the lease's series (inlet_bucket_*) and the takeovers'.

// StandingBy says the node stands by for its bucket prefix (--standby): /readyz answers 503
// with "standby: " and what writer tells of the writer, and inlet_bucket_writer is 0.
func (m *Metrics) StandingBy(writer func() string) {
	m.registerRole()
	m.standby.Store(&writer)
}

// TookOver says the standby took the prefix and serves, d after it took the lease:
// inlet_takeovers_total counts it and inlet_takeover_duration_seconds is d. The lease is
// told with WatchLease.
func (m *Metrics) TookOver(d time.Duration) {
	m.standby.Store(nil)
	m.takeoverNanos.Store(int64(d))
	m.takeovers.Add(1)
}

// standingBy is why /readyz fails for a standby ("" when the node is not one).
func (m *Metrics) standingBy() string {
	f := m.standby.Load()
	if f == nil {
		return ""
	}
	return "standby: " + (*f)()
}

func (m *Metrics) registerRole() {
	m.roleOnce.Do(func() { m.Registry.MustRegister(roleCollector{m}) })
}

var (
	takeoversDesc   = desc("takeovers_total", "Times this process, standing by (--standby), took its bucket prefix and served.")
	takeoverDurDesc = desc("takeover_duration_seconds", "How long the last takeover took from the lease taken to serving (restoring what the node lacked from the bucket, the listeners bound).")
)

type roleCollector struct{ m *Metrics }

func (c roleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaseEpochDesc, leaseWriterDesc, leaseFencedDesc, takeoversDesc, takeoverDurDesc} {
		ch <- d
	}
}

func (c roleCollector) Collect(ch chan<- prometheus.Metric) {
	if l := c.m.lease.Load(); l != nil {
		s := (*l).State()
		writer, fenced := 0.0, 0.0
		if s.Writer {
			writer = 1
		}
		if s.Fenced {
			fenced = 1
		}
		ch <- prometheus.MustNewConstMetric(leaseEpochDesc, prometheus.GaugeValue, float64(s.Epoch))
		ch <- prometheus.MustNewConstMetric(leaseWriterDesc, prometheus.GaugeValue, writer)
		ch <- prometheus.MustNewConstMetric(leaseFencedDesc, prometheus.CounterValue, fenced)
	} else {
		ch <- prometheus.MustNewConstMetric(leaseWriterDesc, prometheus.GaugeValue, 0) // standing by
	}
	ch <- prometheus.MustNewConstMetric(takeoversDesc, prometheus.CounterValue, float64(c.m.takeovers.Load()))
	ch <- prometheus.MustNewConstMetric(takeoverDurDesc, prometheus.GaugeValue, time.Duration(c.m.takeoverNanos.Load()).Seconds())
}
