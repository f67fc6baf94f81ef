package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// syncBuckets are the upper bounds, in seconds, of the fsync and group-commit histograms:
// 50 us (a write cache that lies, or tmpfs) doubling to about 1.6 s (a disk in trouble).
var syncBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)

// Commits is the batch log's observer: it runs on the completer goroutine, once per group
// and once per segment fdatasync.
type Commits struct {
	groups, records, bytes prometheus.Counter
	latency, fsync         prometheus.Histogram
}

// NewCommits registers the group-commit and fsync metrics with reg.
func NewCommits(reg prometheus.Registerer) *Commits {
	c := &Commits{
		groups: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "group_commits_total",
			Help: "Group commits made durable (each holds one or more produce requests).",
		}),
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "group_commit_records_total",
			Help: "Records appended by durable group commits: what producers were acknowledged for, each record once (an idempotent producer's resent duplicate appends nothing).",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "group_commit_bytes_total",
			Help: "Bytes of record batches appended by durable group commits.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "group_commit_duration_seconds",
			Help:    "Time from the committer starting a group to the group being durable (its write and fsync, and the wait for the group before it).",
			Buckets: syncBuckets,
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "fsync_duration_seconds",
			Help:    "Time of each fdatasync of a segment file (--storage segments). With --storage pebble the syncs are Pebble's: inlet_pebble_wal_fsync_duration_seconds.",
			Buckets: syncBuckets,
		}),
	}
	reg.MustRegister(c.groups, c.records, c.bytes, c.latency, c.fsync)
	return c
}

// GroupDurable implements batchlog.Observer.
func (c *Commits) GroupDurable(records, bytes int, d time.Duration) {
	c.groups.Inc()
	c.records.Add(float64(records))
	c.bytes.Add(float64(bytes))
	c.latency.Observe(d.Seconds())
}

// Synced implements batchlog.Observer.
func (c *Commits) Synced(d time.Duration) { c.fsync.Observe(d.Seconds()) }
