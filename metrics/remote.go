package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"inlet/tier"
)

// Remote is what the remote tier's collector reads at scrape time (*tier.Tier implements it).
type Remote interface {
	Stats() tier.Stats
}

// WatchRemote adds the remote tier's state (inlet_remote_*) to what is scraped, and to what
// /readyz tells.
func (m *Metrics) WatchRemote(r Remote) {
	m.Registry.MustRegister(remoteCollector{r})
	m.remote.Store(&r)
}

type remoteCollector struct{ r Remote }

var (
	remoteUploadedBytesDesc   = desc("remote_uploaded_bytes_total", "Bytes of objects uploaded to the remote tier.")
	remoteUploadedObjectsDesc = desc("remote_uploaded_objects_total", "Objects uploaded to the remote tier.")
	remoteErrorsDesc          = desc("remote_errors_total", "Passes of the remote tier that failed in part (an upload, a deletion, the listing: the bucket down, slow or answering errors); the next is tried after a backoff.")
	remoteDeletedDesc         = desc("remote_deleted_objects_total", "Remote objects deleted by retention, DeleteRecords or topic deletion.")
	remoteOrphansDesc         = desc("remote_orphans_deleted_total", "Objects deleted because no record named them (an upload or a deletion a crash cut short).")
	remoteLagBytesDesc        = desc("remote_upload_lag_bytes", "Batch data of tiered topics below the last stable offset not yet uploaded.")
	remoteLagSecondsDesc      = desc("remote_upload_lag_seconds", "How long the oldest batch not yet uploaded has waited.")
	remoteReadBytesDesc       = desc("remote_read_bytes_total", "Bytes of batches fetches read from the remote tier.")
	remoteReadCallsDesc       = desc("remote_read_requests_total", "Ranged GETs made for remote reads.")
	remoteReadErrorsDesc      = desc("remote_read_errors_total", "Ranged GETs that failed (the fetch is answered KAFKA_STORAGE_ERROR).")
	remoteCacheDesc           = desc("remote_read_cache_total", "Lookups of the remote read cache (footers and chunks), by result.", "result")
	remoteStoredBytesDesc     = desc("remote_stored_bytes", "Bytes of the objects the remote tier's manifest records.")
	remoteStoredObjectsDesc   = desc("remote_stored_objects", "Objects the remote tier's manifest records.")
	remoteHealthyDesc         = desc("remote_healthy", "1 while the tier's last pass succeeded, 0 while it fails.")
	remoteGateWaitsDesc       = desc("remote_upload_gate_waits_total", "Chunks of uploads that waited for a diskless commit PUT in flight (the tier gives way to them while it keeps up).")
	remoteGateSecondsDesc     = desc("remote_upload_gate_wait_seconds_total", "Time uploads waited for diskless commit PUTs in flight.")
)

func (c remoteCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{remoteUploadedBytesDesc, remoteUploadedObjectsDesc, remoteErrorsDesc, remoteDeletedDesc,
		remoteOrphansDesc, remoteLagBytesDesc, remoteLagSecondsDesc, remoteReadBytesDesc, remoteReadCallsDesc, remoteReadErrorsDesc,
		remoteCacheDesc, remoteStoredBytesDesc, remoteStoredObjectsDesc, remoteHealthyDesc, remoteGateWaitsDesc, remoteGateSecondsDesc} {
		ch <- d
	}
}

func (c remoteCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(remoteUploadedBytesDesc, s.UploadedBytes)
	counter(remoteUploadedObjectsDesc, s.UploadedObjects)
	counter(remoteErrorsDesc, s.Errors)
	counter(remoteDeletedDesc, s.DeletedObjects)
	counter(remoteOrphansDesc, s.OrphansDeleted)
	gauge(remoteLagBytesDesc, float64(s.LagBytes))
	gauge(remoteLagSecondsDesc, s.LagSeconds)
	counter(remoteReadBytesDesc, s.ReadBytes)
	counter(remoteReadCallsDesc, s.ReadCalls)
	counter(remoteReadErrorsDesc, s.ReadErrors)
	counter(remoteCacheDesc, s.CacheHits, "hit")
	counter(remoteCacheDesc, s.CacheMisses, "miss")
	gauge(remoteStoredBytesDesc, float64(s.RemoteBytes))
	gauge(remoteStoredObjectsDesc, float64(s.RemoteObjects))
	counter(remoteGateWaitsDesc, s.GateWaits)
	ch <- prometheus.MustNewConstMetric(remoteGateSecondsDesc, prometheus.CounterValue, s.GateWaited.Seconds())
	healthy := 0.0
	if s.Healthy {
		healthy = 1
	}
	gauge(remoteHealthyDesc, healthy)
}

// remoteBehind is the line /readyz adds while the remote tier's last pass failed ("" when it
// did not, or there is no tier). The node stays ready: produce and local reads go on.
func (m *Metrics) remoteBehind() string {
	r := m.remote.Load()
	if r == nil {
		return ""
	}
	s := (*r).Stats()
	if s.Healthy {
		return ""
	}
	return "remote tier behind: " + s.LastError
}
