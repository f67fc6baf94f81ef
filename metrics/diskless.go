package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"inlet/diskless"
)

// Diskless is what the diskless commit log's collector reads at scrape time
// (*diskless.Committer implements it).
type Diskless interface {
	Stats() *diskless.Stats
	PendingBytes() int64
	CheckpointStats() diskless.CheckpointStats
}

// commitBuckets are the upper bounds, in seconds, of the diskless commit latency: 5 ms (a
// bucket on loopback, a window cut short) doubling to about 82 s, past the request timeout
// (30 s) a produce waits at most.
var commitBuckets = prometheus.ExponentialBuckets(5e-3, 2, 15)

// DisklessCommits is the diskless committer's observer (diskless.Config.Observer): it runs on
// the commit loop's goroutine, once per group when its object lands.
type DisklessCommits struct{ latency prometheus.Histogram }

// Committed implements diskless.Observer.
func (d *DisklessCommits) Committed(t time.Duration) { d.latency.Observe(t.Seconds()) }

// DisklessObserver registers the diskless commit latency histogram and returns the observer
// to give the committer when it is made (before it recovers); WatchDiskless adds the rest.
// Call it once.
func (m *Metrics) DisklessObserver() *DisklessCommits {
	d := &DisklessCommits{latency: prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "diskless_commit_duration_seconds",
		Help:    "Time from a group of diskless produce batches entering the commit window to the commit object holding them landing in the bucket (its requests are answered then, unless timed out).",
		Buckets: commitBuckets,
	})}
	m.Registry.MustRegister(d.latency)
	return d
}

// WatchDiskless adds the diskless commit log's counters (inlet_diskless_*) to what is scraped.
func (m *Metrics) WatchDiskless(d Diskless) {
	m.Registry.MustRegister(disklessCollector{d})
}

type disklessCollector struct{ d Diskless }

var (
	disklessPutsDesc        = desc("diskless_puts_total", "Commit objects written to the bucket (each holds the batches of every diskless partition of one commit window, at most one per --diskless-commit-interval-ms).")
	disklessPutBytesDesc    = desc("diskless_put_bytes_total", "Bytes of the commit objects written to the bucket.")
	disklessPutFailuresDesc = desc("diskless_put_failures_total", "Attempts at writing a commit object that failed (the bucket down, slow or answering errors); each is retried with a backoff until it lands.")
	disklessTimedOutDesc    = desc("diskless_requests_timed_out_total", "Groups of diskless produce requests answered REQUEST_TIMED_OUT after --diskless-request-timeout-ms waiting for the bucket (their batches stay queued for it).")
	disklessFencedDesc      = desc("diskless_fenced_total", "1 once the commit log stopped because another writer took the bucket prefix: told by the lease (inlet_bucket_fenced_total counts that too) or by meeting another writer's object under its next number, which only this counts.")
	disklessPendingDesc     = desc("diskless_pending_bytes", "Batch data of diskless topics held for the bucket and not in it yet; produce to them is refused KAFKA_STORAGE_ERROR past --diskless-max-pending-bytes.")
	disklessRecoverDurDesc  = desc("diskless_recover_duration_seconds", "How long the commit log's recovery at start-up took (reading the commit objects, replaying what the local log lacked, uploading local batches never written to the bucket).")
	disklessRecoverObjDesc  = desc("diskless_recover_objects", "Commit objects read whole (GET) by the recovery at start-up.")
	disklessRecoverCachDesc = desc("diskless_recover_cached_objects", "Of the commit objects the recovery at start-up read, those read from the copy a standby kept while it followed the writer (the others were read from the bucket).")
	disklessReplayedDesc    = desc("diskless_recover_replayed_batches", "Batches the recovery at start-up appended to the local log from commit objects (all of them after a restore on an empty disk).")
	disklessUploadedDesc    = desc("diskless_recover_uploaded_batches", "Local batches the recovery at start-up wrote to the bucket (synced locally, never written there before the node stopped).")
	disklessCheckpointsDesc = desc("diskless_checkpoints_total", "Checkpoints of the commit log written to the bucket (each folds the state of the commit objects the remote tier covers, which are then deleted).")
	disklessCkObjectDesc    = desc("diskless_checkpoint_last_object", "Number of the last commit object the newest checkpoint covers (0: none written by this run).")
	disklessCkBytesDesc     = desc("diskless_checkpoint_bytes", "Size of the newest checkpoint written.")
	disklessCkWindowsDesc   = desc("diskless_checkpoint_producer_windows", "Producer windows held in the newest checkpoint written.")
	disklessDeletedDesc     = desc("diskless_deleted_objects_total", "Commit objects deleted from the bucket once a checkpoint covered them.")
)

func (c disklessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{disklessPutsDesc, disklessPutBytesDesc, disklessPutFailuresDesc, disklessTimedOutDesc,
		disklessFencedDesc, disklessPendingDesc, disklessRecoverDurDesc, disklessRecoverObjDesc, disklessRecoverCachDesc, disklessReplayedDesc, disklessUploadedDesc,
		disklessCheckpointsDesc, disklessCkObjectDesc, disklessCkBytesDesc, disklessCkWindowsDesc, disklessDeletedDesc} {
		ch <- d
	}
}

func (c disklessCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(disklessPutsDesc, s.Puts.Load())
	counter(disklessPutBytesDesc, s.PutBytes.Load())
	counter(disklessPutFailuresDesc, s.PutFailures.Load())
	counter(disklessTimedOutDesc, s.TimedOut.Load())
	fenced := int64(0)
	if s.Fenced.Load() {
		fenced = 1
	}
	counter(disklessFencedDesc, fenced)
	gauge(disklessPendingDesc, float64(c.d.PendingBytes()))
	gauge(disklessRecoverDurDesc, time.Duration(s.RecoverNanos.Load()).Seconds())
	gauge(disklessRecoverObjDesc, float64(s.RecoverObjects.Load()))
	gauge(disklessRecoverCachDesc, float64(s.RecoverCached.Load()))
	gauge(disklessReplayedDesc, float64(s.RecoverReplayed.Load()))
	gauge(disklessUploadedDesc, float64(s.RecoverUploaded.Load()))
	ck := c.d.CheckpointStats()
	counter(disklessCheckpointsDesc, int64(ck.Written))
	gauge(disklessCkObjectDesc, float64(ck.Last))
	gauge(disklessCkBytesDesc, float64(ck.LastBytes))
	gauge(disklessCkWindowsDesc, float64(ck.Windows))
	counter(disklessDeletedDesc, int64(ck.DeletedObjects))
}
