package metrics

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"inlet/batchlog"
	"inlet/groups"
)

// Log is what the state collector reads from the record log at scrape time (*batchlog.Log
// implements it): the topics and their partitions' offsets, and the log's counters. Only
// batchlog's catalog records and Stats value are named here; the log itself is not.
type Log interface {
	// Topics lists every topic; Topic finds one by name.
	Topics() []*batchlog.Topic
	Topic(name string) (*batchlog.Topic, bool)
	// Stats is a snapshot of the log's counters and Pebble's metrics.
	Stats() batchlog.Stats
}

// Node is what the state collector reads from the Kafka server at scrape time
// (server.Server implements it).
type Node interface {
	// InflightBudget is the in-flight budget's bytes held now and its limit.
	InflightBudget() (used, limit int64)
	// OpenConnections counts open client connections by listener name (every listener,
	// also those with none).
	OpenConnections() map[string]int
	// Refusals counts connections closed or refused by the server, by reason, since start.
	Refusals() map[string]int64
	// ProtocolErrors counts connections closed for a bad frame or header since start.
	ProtocolErrors() int64
	// CommittedOffsets lists every committed consumer-group offset.
	CommittedOffsets() []groups.CommittedOffset
	// Transactions counts transactional ids by the state of their transaction (Kafka's
	// names), and transactions ended since start by outcome (commit, abort, timeout).
	Transactions() (byState map[string]int, ended map[string]int64)
}

// stateCollector reads state where it already is, when Prometheus scrapes: nothing on the
// produce path keeps a copy up to date for it. A scrape walks every partition and committed
// offset and takes Pebble's metrics; with many thousands of partitions that is a
// scrape-sized cost, paid once per scrape interval.
type stateCollector struct {
	log  Log
	node Node
}

func newStateCollector(log Log, node Node) *stateCollector {
	return &stateCollector{log: log, node: node}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}

var (
	budgetUsedDesc  = desc("inflight_budget_used_bytes", "Bytes of requests read and not yet answered (for produce: not yet durable), as the capacity of the buffers holding them (--inflight-budget).")
	budgetLimitDesc = desc("inflight_budget_limit_bytes", "The in-flight budget (--inflight-budget); when used reaches it, Inlet stops reading sockets.")
	connsDesc       = desc("connections", "Open client connections, by listener.", "listener")
	refusalsDesc    = desc("connections_refused_total", "Connections refused or closed by the server, by reason (connection limits, frame size, in-flight budget, protocol errors, deleted users).", "reason")
	protoErrDesc    = desc("protocol_errors_total", "Connections closed for a frame that could not be trusted (a bad length, header or body, an unsupported API or version).")

	hwDesc       = desc("partition_high_watermark", "The offset after the last durable record of each partition.", "topic", "partition")
	logStartDesc = desc("partition_log_start_offset", "The first offset each partition still holds (retention and DeleteRecords move it).", "topic", "partition")
	committedDes = desc("group_committed_offset", "The offset each consumer group committed for a partition.", "group", "topic", "partition")
	lagDesc      = desc("group_lag", "Records between a group's committed offset and the partition's high watermark (0 when the commit is at or past it).", "group", "topic", "partition")
	lsoDesc      = desc("partition_last_stable_offset", "The offset below which every transaction on each partition has ended: how far read_committed consumers read.", "topic", "partition")
	txnsDesc     = desc("transactions", "Transactional ids, by the state of their transaction.", "state")
	txnEndDesc   = desc("transactions_ended_total", "Transactions ended since start, by outcome: commit, abort (by the producer or a new one with its id), timeout.", "outcome")

	partitionsDesc   = desc("partitions", "Partitions of all topics (--max-partitions bounds them).")
	windowsDesc      = desc("producer_windows", "Idempotent producer windows held, one per producer id and partition (--max-concurrent-producer-ids bounds them).")
	windowsEvictDesc = desc("producer_windows_evicted_total", "Idle producer windows evicted to make room for new ones at the bound (at load too).")
	windowsRefDesc   = desc("producer_windows_refused_total", "Batches refused THROTTLING_QUOTA_EXCEEDED because no window at the bound was idle.")
	segFilesDesc     = desc("segment_files", "Segment files holding record data (--storage segments).")
	segBytesDesc     = desc("segment_bytes", "Bytes of the segment files on disk (their sizes, block padding of direct writes included).")
	relocDesc        = desc("segment_relocated_bytes_total", "Bytes of live batches copied forward out of old segments so that the segments could be deleted.")
	compactPassDesc  = desc("compaction_passes_total", "Compaction passes run over partitions of compacted topics (those below min.cleanable.dirty.ratio are not counted).")
	compactBatchDesc = desc("compaction_batches_total", "Batches compaction changed: rewritten with fewer records, or dropped with none left.", "action")
	compactRecDesc   = desc("compaction_records_removed_total", "Records compaction removed: superseded by a later record of their key, tombstones past delete.retention.ms, aborted transactions' records.")
	fetchCacheDesc   = desc("fetch_cache_reads_total", "Batch reads of fetches and other readers, by where they were served from: hit (the tail cache of recently written data) or miss (the segment files).", "result")
	fetchCacheBytes  = desc("fetch_cache_bytes", "Bytes the tail cache holds (--fetch-cache bounds them).")
	suspendDesc      = desc("writes_suspended", "1 while a full disk has suspended writes (appends answered KAFKA_STORAGE_ERROR), else 0.")

	stallsDesc     = desc("pebble_write_stalls_total", "Times Pebble delayed writes (memtables or L0 files waiting for flushes and compactions).")
	stallTimeDesc  = desc("pebble_write_stall_seconds_total", "Time Pebble's writes were stalled, a stall under way included.")
	debtDesc       = desc("pebble_compaction_debt_bytes", "Pebble's estimate of the bytes compactions must rewrite for the LSM to reach a stable shape.")
	compactDesc    = desc("pebble_compactions_total", "Compactions Pebble has run.")
	compactNowDesc = desc("pebble_compactions_in_progress", "Compactions running now.")
	flushesDesc    = desc("pebble_flushes_total", "Memtable flushes Pebble has run.")
	memtableDesc   = desc("pebble_memtable_bytes", "Bytes allocated by Pebble's memtables.")
	readAmpDesc    = desc("pebble_read_amplification", "Sublevels of L0 plus non-empty lower levels: what a read may have to look at.")
	l0FilesDesc    = desc("pebble_l0_files", "Sstables in L0; many of them stall writes.")
	diskDesc       = desc("pebble_disk_bytes", "Bytes Pebble holds on disk: WAL, sstables, blob files, obsolete files not yet deleted.")
	walWrittenDesc = desc("pebble_wal_written_bytes_total", "Bytes Pebble wrote to its WAL.")
	walFsyncDesc   = desc("pebble_wal_fsync_duration_seconds", "Time of each fsync of Pebble's WAL (every synced metadata write; with --storage pebble, every group commit).")
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{budgetUsedDesc, budgetLimitDesc, connsDesc, refusalsDesc, protoErrDesc,
		hwDesc, logStartDesc, committedDes, lagDesc, lsoDesc, txnsDesc, txnEndDesc, partitionsDesc, windowsDesc, windowsEvictDesc, windowsRefDesc, segFilesDesc, segBytesDesc, relocDesc, fetchCacheDesc, fetchCacheBytes, suspendDesc, compactPassDesc, compactBatchDesc, compactRecDesc,
		stallsDesc, stallTimeDesc, debtDesc, compactDesc, compactNowDesc, flushesDesc, memtableDesc, readAmpDesc,
		l0FilesDesc, diskDesc, walWrittenDesc, walFsyncDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, validLabels(labels)...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, validLabels(labels)...)
	}

	used, limit := c.node.InflightBudget()
	gauge(budgetUsedDesc, float64(used))
	gauge(budgetLimitDesc, float64(limit))
	for l, n := range c.node.OpenConnections() {
		gauge(connsDesc, float64(n), l)
	}
	for r, n := range c.node.Refusals() {
		counter(refusalsDesc, float64(n), r)
	}
	counter(protoErrDesc, float64(c.node.ProtocolErrors()))

	for _, t := range c.log.Topics() {
		for _, p := range t.Partitions {
			idx := strconv.Itoa(int(p.Index))
			gauge(hwDesc, float64(p.HighWatermark()), t.Name, idx)
			gauge(logStartDesc, float64(p.LogStartOffset()), t.Name, idx)
			gauge(lsoDesc, float64(p.LastStableOffset()), t.Name, idx)
		}
	}
	byState, ended := c.node.Transactions()
	for st, n := range byState {
		gauge(txnsDesc, float64(n), st)
	}
	for outcome, n := range ended {
		counter(txnEndDesc, float64(n), outcome)
	}
	for _, o := range c.node.CommittedOffsets() {
		idx := strconv.Itoa(int(o.Partition))
		gauge(committedDes, float64(o.Offset), o.Group, o.Topic, idx)
		if t, ok := c.log.Topic(o.Topic); ok && o.Partition >= 0 && int(o.Partition) < len(t.Partitions) {
			gauge(lagDesc, float64(max(t.Partitions[o.Partition].HighWatermark()-o.Offset, 0)), o.Group, o.Topic, idx)
		}
	}

	st := c.log.Stats()
	gauge(partitionsDesc, float64(st.Partitions))
	gauge(windowsDesc, float64(st.Producers.Held))
	counter(windowsEvictDesc, float64(st.Producers.Evicted))
	counter(windowsRefDesc, float64(st.Producers.Refused))
	gauge(segFilesDesc, float64(st.SegmentFiles))
	gauge(segBytesDesc, float64(st.SegmentBytes))
	counter(relocDesc, float64(st.RelocatedBytes))
	counter(fetchCacheDesc, float64(st.FetchCacheHits), "hit")
	counter(fetchCacheDesc, float64(st.FetchCacheMisses), "miss")
	gauge(fetchCacheBytes, float64(st.FetchCacheBytes))
	suspended := 0.0
	if st.WritesSuspended {
		suspended = 1
	}
	gauge(suspendDesc, suspended)
	counter(compactPassDesc, float64(st.CompactionPasses))
	counter(compactBatchDesc, float64(st.CompactedBatchesRewritten), "rewritten")
	counter(compactBatchDesc, float64(st.CompactedBatchesDropped), "dropped")
	counter(compactRecDesc, float64(st.CompactedRecordsRemoved))
	counter(stallsDesc, float64(st.WriteStalls))
	counter(stallTimeDesc, st.WriteStallTime.Seconds())
	if pm := st.Pebble; pm != nil {
		gauge(debtDesc, float64(pm.Compact.EstimatedDebt))
		counter(compactDesc, float64(pm.Compact.Count))
		gauge(compactNowDesc, float64(pm.Compact.NumInProgress))
		counter(flushesDesc, float64(pm.Flush.Count))
		gauge(memtableDesc, float64(pm.MemTable.Size))
		gauge(readAmpDesc, float64(pm.ReadAmp()))
		gauge(l0FilesDesc, float64(pm.Levels[0].TablesCount))
		gauge(diskDesc, float64(pm.DiskSpaceUsage()))
		counter(walWrittenDesc, float64(pm.WAL.BytesWritten))
		if h := pebbleFsync(pm); h != nil {
			ch <- h
		}
	}
}

// pebbleFsync re-exports Pebble's WAL fsync histogram under Inlet's name and in seconds.
// Pebble records nanoseconds in 100 buckets (pebble.FsyncLatencyBuckets); only those of its
// bounds nearest below syncBuckets' are kept, so the counts stay exact at every bound shown
// and the histogram has the size of Inlet's own.
func pebbleFsync(pm *pebble.Metrics) prometheus.Metric {
	if pm.LogWriter.FsyncLatency == nil {
		return nil
	}
	var m dto.Metric
	if err := pm.LogWriter.FsyncLatency.Write(&m); err != nil || m.Histogram == nil {
		return nil
	}
	h := m.Histogram
	buckets := make(map[float64]uint64, len(syncBuckets))
	bi := 0
	for _, want := range syncBuckets {
		// The last of Pebble's bounds at or below want (its bounds ascend).
		var pick *dto.Bucket
		for ; bi < len(h.Bucket) && h.Bucket[bi].GetUpperBound()/1e9 <= want; bi++ {
			pick = h.Bucket[bi]
		}
		if pick != nil {
			buckets[pick.GetUpperBound()/1e9] = pick.GetCumulativeCount()
		}
	}
	out, err := prometheus.NewConstHistogram(walFsyncDesc, h.GetSampleCount(), h.GetSampleSum()/1e9, buckets)
	if err != nil {
		return nil
	}
	return out
}

// validLabels makes label values valid UTF-8, as Prometheus requires: a group id is any
// string a client sends (Kafka does not check it), and one that is not UTF-8 would fail the
// whole scrape. Invalid bytes become U+FFFD.
func validLabels(labels []string) []string {
	for i, v := range labels {
		if !utf8.ValidString(v) {
			labels[i] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	return labels
}
