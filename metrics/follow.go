package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"inlet/diskless/follow"
	"inlet/tier"
)

// Follower is what a standby's follower collector reads at scrape time: the follower of the
// diskless commit log while the node stands by (diskless/follow), its last stats once it has
// stopped (the lag then 0).
type Follower interface {
	Stats() follow.Stats
}

// WatchFollower adds a standby's follower (inlet_standby_*) to what is scraped.
func (m *Metrics) WatchFollower(f Follower) {
	m.Registry.MustRegister(followerCollector{f})
}

type followerCollector struct{ f Follower }

var (
	standbyLagObjectsDesc = desc("standby_lag_objects", "Commit objects of the diskless commit log past its newest checkpoint that this standby has no copy of yet, as of its last look at the bucket (0 when caught up, and once the node writes): what a takeover now would read from the bucket.")
	standbyLagBytesDesc   = desc("standby_lag_bytes", "Bytes of those commit objects.")
	standbyLagSecondsDesc = desc("standby_lag_seconds", "How long the oldest of those commit objects has waited since this standby first listed it (0 when caught up).")
	standbyFetchedDesc    = desc("standby_fetched_bytes_total", "Bytes of commit objects this standby read from the bucket into its copy while it stood by.")
)

func (c followerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- standbyLagObjectsDesc
	ch <- standbyLagBytesDesc
	ch <- standbyLagSecondsDesc
	ch <- standbyFetchedDesc
}

// RecordCache is a standby's records of the tiered objects, read ahead for its takeover's
// restore (tier.RecordCache).
type RecordCache interface {
	Stats() tier.RecordCacheStats
}

// WatchRecordCache adds a standby's records of the tiered objects (inlet_standby_tier_records)
// to what is scraped.
func (m *Metrics) WatchRecordCache(c RecordCache) {
	m.Registry.MustRegister(recordCacheCollector{c})
}

type recordCacheCollector struct{ c RecordCache }

var standbyTierRecordsDesc = desc("standby_tier_records", "Tiered objects whose records (trailer and footer) this standby holds, read ahead while it stands by: a takeover's restore reads only the others from the bucket.")

func (c recordCacheCollector) Describe(ch chan<- *prometheus.Desc) { ch <- standbyTierRecordsDesc }

func (c recordCacheCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(standbyTierRecordsDesc, prometheus.GaugeValue, float64(c.c.Stats().Records))
}

func (c followerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.f.Stats()
	ch <- prometheus.MustNewConstMetric(standbyLagObjectsDesc, prometheus.GaugeValue, float64(s.LagObjects))
	ch <- prometheus.MustNewConstMetric(standbyLagBytesDesc, prometheus.GaugeValue, float64(s.LagBytes))
	ch <- prometheus.MustNewConstMetric(standbyLagSecondsDesc, prometheus.GaugeValue, s.Behind.Seconds())
	ch <- prometheus.MustNewConstMetric(standbyFetchedDesc, prometheus.CounterValue, float64(s.FetchedBytes))
}
