package bench

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"inlet/bench/consume"
	"inlet/bench/human"
	"inlet/loadgen"
)

// The consume phase of `bench compare --consume` runs on each target's broker after the produce
// run has been measured (and its /proc figures read), before the broker is stopped
// (consume_run.go, with the clients of package bench/consume):
//
//  1. fill: loadgen writes FillRecords records flat out to a topic of its own, with the
//     produce run's load settings but the phase's own partitioner, linger, batch size and
//     buffer (the shape's, ConsumeShapes); every record must be acknowledged.
//  2. catch-up: Consumers kgo clients, the partitions dealt round-robin among them and
//     assigned directly (ConsumePartitions from the start offset, no group), read every
//     partition up to the high watermark listed after the fill. Records/s run from just before
//     the clients are created to the last record; the broker's CPU seconds over the same
//     window give records per server CPU-second. bench's own CPU (the clients) and the share
//     of the machine's CPU time that was busy are taken over the same window (and over the
//     tail's): on a machine the read keeps busy, the clients' share sets the pace too.
//  3. tail: TailProducers clients produce at TailRate records/s (open loop, the fill's
//     producer settings) for TailDuration while the same consumers follow the end of the
//     topic. Each value carries its intended send time (the stamp: bench/consume, stamp.go);
//     a consumer takes the receive time when PollFetches returns, and the difference is the
//     end-to-end latency.
//     Every acknowledged record must be received once, no record may fail.
//
// Every phase ends by itself: the fill and the catch-up after Timeout each, the tail
// DrainTimeout after sending stops.

// ConsumeShape is a named set of the consume phase's producer and fetch settings
// (`bench compare --consume-shape`); a zero field is taken from the default shape.
type ConsumeShape struct {
	Name, Description string
	// Producers of the fill and the tail (loadgen's Config fields).
	Partitioner        string
	Linger             time.Duration
	BatchMaxBytes      int32
	MaxBufferedRecords int
	// Every consumer's fetch settings (kgo's options of the same names).
	FetchMaxBytes          int32
	FetchMaxPartitionBytes int32
	FetchMinBytes          int32
	FetchMaxWait           time.Duration
}

// Names of ConsumeShapes, and ShapeCustom for settings that match none.
const (
	ShapeDefault = "default"
	ShapePinned  = "pinned"
	ShapeCustom  = "custom"
)

// ConsumeShapes are the shapes --consume-shape names, the default first.
//
// The default's producers are the produce run's (loadgen's uniform partitioner, bench's 5 ms
// linger, kgo's batch size and the run's --max-buffered-records, which its zero
// MaxBufferedRecords stands for); its fetch settings are kgo's defaults (FetchMaxWait is kgo's
// 5 s, not the Java client's 500 ms), set explicitly so that a kgo upgrade cannot move a figure.
//
// "pinned" is the shape of an independent side-by-side run against klite and kfake: each producer writes one partition and
// buffers little, so every partition is a stream of large batches of one producer id, and the
// consumers fetch 10 MiB a partition and wait at most the Java client's 500 ms.
var ConsumeShapes = []ConsumeShape{
	{Name: ShapeDefault, Description: "producers as in the produce run (uniform partitioner, linger 5ms, batches up to 1,000,012 B, --max-buffered-records); fetches of kgo's defaults (50 MiB, 1 MiB a partition, min 1 B, max wait 5s)",
		Partitioner: loadgen.DefaultPartitioner, Linger: benchLinger, BatchMaxBytes: loadgen.DefaultBatchMaxBytes,
		FetchMaxBytes: 50 << 20, FetchMaxPartitionBytes: 1 << 20, FetchMinBytes: 1, FetchMaxWait: 5 * time.Second},
	{Name: ShapePinned, Description: "producer i writes only partition i (per-producer partitioner), linger 5ms, batches up to 1 MiB, 10,000 buffered records; fetches of 50 MiB, 10 MiB a partition, min 1 B, max wait 500ms",
		Partitioner: loadgen.PerProducerPartitioner, Linger: 5 * time.Millisecond, BatchMaxBytes: 1 << 20, MaxBufferedRecords: 10_000,
		FetchMaxBytes: 50 << 20, FetchMaxPartitionBytes: 10 << 20, FetchMinBytes: 1, FetchMaxWait: 500 * time.Millisecond},
}

// consumeShape is the shape called name.
func consumeShape(name string) (ConsumeShape, bool) {
	for _, sh := range ConsumeShapes {
		if sh.Name == name {
			return sh, true
		}
	}
	return ConsumeShape{}, false
}

// ConsumeShapeNames are the names of ConsumeShapes.
func ConsumeShapeNames() []string {
	var names []string
	for _, sh := range ConsumeShapes {
		names = append(names, sh.Name)
	}
	return names
}

// Defaults of ConsumeSettings.
const (
	DefaultFillRecords    = 10_000_000
	DefaultConsumers      = 4
	DefaultTailRate       = 200_000
	DefaultTailDuration   = 20 * time.Second
	DefaultConsumeTimeout = 5 * time.Minute
	// DefaultDrainTimeout bounds the wait, after the tail producers stop sending, for their
	// acks and for the consumers to receive every acknowledged record.
	DefaultDrainTimeout = 30 * time.Second
)

// ConsumeSettings configure the consume phase; once filled in (Normalize) they are stored in
// File.Consume, so that a report states how every target was read.
type ConsumeSettings struct {
	// Topic is the phase's own topic (the produce run's topic + "-consume"), so that the
	// produce run's records are not read.
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	RecordSize int    `json:"record_size"`

	// Shape is the ConsumeShapes name whose settings these are, or ShapeCustom; Normalize
	// sets it from the settings, so it is true of every recorded run. Empty in files written
	// before the producer settings were recorded (their producers were the produce run's).
	Shape string `json:"shape,omitempty"`

	FillRecords int64 `json:"fill_records"`
	// Producers of the fill and of the tail: loadgen's Config fields of the same names.
	Partitioner        string        `json:"partitioner,omitempty"`
	Linger             time.Duration `json:"linger_ns,omitempty"`
	BatchMaxBytes      int32         `json:"batch_max_bytes,omitempty"`
	MaxBufferedRecords int           `json:"max_buffered_records,omitempty"`

	Consumers int `json:"consumers"`

	FetchMaxBytes          int32         `json:"fetch_max_bytes"`
	FetchMaxPartitionBytes int32         `json:"fetch_max_partition_bytes"`
	FetchMinBytes          int32         `json:"fetch_min_bytes"`
	FetchMaxWait           time.Duration `json:"fetch_max_wait_ns"`
	IsolationLevel         string        `json:"isolation_level"`

	TailRate      float64       `json:"tail_rate"`
	TailDuration  time.Duration `json:"tail_duration_ns"`
	TailProducers int           `json:"tail_producers"`

	// Timeout bounds the fill and the catch-up read each.
	Timeout      time.Duration `json:"timeout_ns"`
	DrainTimeout time.Duration `json:"drain_timeout_ns"`
}

// Normalize fills the zero fields (the topic, partitions and record size from load; the
// producer and fetch settings from the shape Shape names, then from the default shape),
// checks the rest and names the shape the result matches.
func (s ConsumeSettings) Normalize(load Load) (ConsumeSettings, error) {
	def := ConsumeShapes[0]
	def.MaxBufferedRecords = load.MaxBufferedRecords
	setDefault(&def.MaxBufferedRecords, loadgen.DefaultMaxBufferedRecords)
	if s.Shape != "" {
		sh, ok := consumeShape(s.Shape)
		if !ok {
			return s, fmt.Errorf("consume shape %q is not one of %s", s.Shape, strings.Join(ConsumeShapeNames(), ", "))
		}
		s.fillShape(sh)
	}
	s.fillShape(def)
	s.Partitioner = strings.ToLower(s.Partitioner)

	topic := load.Topic
	if topic == "" {
		topic = "bench"
	}
	setDefault(&s.Topic, topic+"-consume")
	setDefault(&s.Partitions, load.Partitions)
	setDefault(&s.Partitions, loadgen.DefaultPartitions)
	setDefault(&s.RecordSize, load.RecordSize)
	setDefault(&s.RecordSize, loadgen.DefaultRecordSize)
	setDefault(&s.FillRecords, DefaultFillRecords)
	setDefault(&s.Consumers, DefaultConsumers)
	setDefault(&s.TailRate, DefaultTailRate)
	setDefault(&s.TailDuration, DefaultTailDuration)
	setDefault(&s.TailProducers, load.Producers)
	setDefault(&s.TailProducers, loadgen.DefaultProducers)
	setDefault(&s.Timeout, DefaultConsumeTimeout)
	setDefault(&s.DrainTimeout, DefaultDrainTimeout)
	s.IsolationLevel = "read_uncommitted"
	switch {
	case load.Transactional:
		return s, errors.New("the consume phase needs non-transactional producers (its counts assume no aborted records)")
	case load.ValueFormat != "" && load.ValueFormat != loadgen.FormatRaw:
		return s, fmt.Errorf("the consume phase needs raw values, not %s (the tail's values carry a send time)", load.ValueFormat)
	case s.RecordSize < consume.StampSize:
		return s, fmt.Errorf("the consume phase needs records of at least %d bytes (send time, producer, sequence), got %d", consume.StampSize, s.RecordSize)
	case s.FillRecords < 1:
		return s, fmt.Errorf("fill records must be at least 1, got %d", s.FillRecords)
	case s.Consumers < 1:
		return s, fmt.Errorf("consumers must be at least 1, got %d", s.Consumers)
	case s.TailRate < 0 || !finite(s.TailRate):
		return s, fmt.Errorf("tail rate must be a positive number, got %v", s.TailRate)
	case s.TailDuration < 0 || s.Timeout < 0 || s.DrainTimeout < 0:
		return s, errors.New("durations must not be negative")
	case s.FetchMaxBytes < 1 || s.FetchMaxPartitionBytes < 1 || s.FetchMinBytes < 1:
		return s, fmt.Errorf("fetch sizes must be at least 1 byte, got max %d, a partition %d, min %d", s.FetchMaxBytes, s.FetchMaxPartitionBytes, s.FetchMinBytes)
	case s.FetchMaxPartitionBytes > s.FetchMaxBytes:
		// kgo would lower it to the fetch's maximum without a word, and the record would lie.
		return s, fmt.Errorf("fetch max partition bytes %d above fetch max bytes %d", s.FetchMaxPartitionBytes, s.FetchMaxBytes)
	case s.FetchMaxBytes > consumeMaxBrokerReadBytes:
		return s, fmt.Errorf("fetch max bytes %d above the consumers' largest response, %d (kgo's BrokerMaxReadBytes)", s.FetchMaxBytes, consumeMaxBrokerReadBytes)
	case s.FetchMaxWait < 10*time.Millisecond:
		// kgo's lower bound.
		return s, fmt.Errorf("fetch max wait must be at least 10ms, got %v", s.FetchMaxWait)
	case s.FetchMaxWait%time.Millisecond != 0:
		return s, fmt.Errorf("fetch max wait %v is not whole milliseconds (the request carries milliseconds)", s.FetchMaxWait)
	}
	// The producer settings are loadgen's to check.
	if _, err := s.producerConfig(load, "127.0.0.1:0", 0).Settings(); err != nil {
		return s, fmt.Errorf("the consume phase's producers: %w", err)
	}
	// A consumer without a partition would measure nothing.
	s.Consumers = min(s.Consumers, s.Partitions)
	s.Shape = ShapeCustom
	for _, sh := range ConsumeShapes {
		if sh.Name == ShapeDefault {
			sh = def
		}
		if s.hasShape(sh) {
			s.Shape = sh.Name
			break
		}
	}
	return s, nil
}

// consumeMaxBrokerReadBytes is kgo's default BrokerMaxReadBytes, the largest response a
// consumer reads: a fetch may not ask for more.
const consumeMaxBrokerReadBytes = 100 << 20

// fillShape sets the zero producer and fetch settings of s to sh's.
func (s *ConsumeSettings) fillShape(sh ConsumeShape) {
	setDefault(&s.Partitioner, sh.Partitioner)
	setDefault(&s.Linger, sh.Linger)
	setDefault(&s.BatchMaxBytes, sh.BatchMaxBytes)
	setDefault(&s.MaxBufferedRecords, sh.MaxBufferedRecords)
	setDefault(&s.FetchMaxBytes, sh.FetchMaxBytes)
	setDefault(&s.FetchMaxPartitionBytes, sh.FetchMaxPartitionBytes)
	setDefault(&s.FetchMinBytes, sh.FetchMinBytes)
	setDefault(&s.FetchMaxWait, sh.FetchMaxWait)
}

// hasShape reports whether the producer and fetch settings of s are sh's.
func (s ConsumeSettings) hasShape(sh ConsumeShape) bool {
	return s.Partitioner == sh.Partitioner && s.Linger == sh.Linger && s.BatchMaxBytes == sh.BatchMaxBytes &&
		s.MaxBufferedRecords == sh.MaxBufferedRecords && s.FetchMaxBytes == sh.FetchMaxBytes &&
		s.FetchMaxPartitionBytes == sh.FetchMaxPartitionBytes && s.FetchMinBytes == sh.FetchMinBytes &&
		s.FetchMaxWait == sh.FetchMaxWait
}

// producerConfig is loadgen's config of the phase's producers (the fill's and the tail's):
// the produce run's load with the phase's topic and producer settings, at rate (0: flat out).
func (s ConsumeSettings) producerConfig(load Load, addr string, rate float64) loadgen.Config {
	cfg := load.Config(addr, rate)
	cfg.Topic, cfg.Partitions, cfg.Duration = s.Topic, s.Partitions, 0
	cfg.Partitioner, cfg.Linger, cfg.BatchMaxBytes, cfg.MaxBufferedRecords = s.Partitioner, s.Linger, s.BatchMaxBytes, s.MaxBufferedRecords
	return cfg
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Label describes the phase for the summary and the report: everything that must be equal for
// two consume figures to compare, the shape's name first.
func (s ConsumeSettings) Label() string {
	producers := "the produce run's producers" // a file from before the settings were recorded
	if s.Partitioner != "" {
		linger := s.Linger.String()
		if s.Linger == loadgen.NoLinger {
			linger = "none"
		}
		producers = fmt.Sprintf("producers with the %s partitioner, linger %s, batches up to %s, %s buffered records each",
			s.Partitioner, linger, byteSize(s.BatchMaxBytes), human.Thousands(float64(s.MaxBufferedRecords)))
	}
	return fmt.Sprintf("%sfill %s records of %d bytes into %d partitions (%s); %d consumers (assigned partitions, fetch max %s, %s a partition, min %s, max wait %v, %s); tail %s records/s from %d producers for %v",
		s.shapeText(), human.Thousands(float64(s.FillRecords)), s.RecordSize, s.Partitions, producers, s.Consumers, byteSize(s.FetchMaxBytes),
		byteSize(s.FetchMaxPartitionBytes), byteSize(s.FetchMinBytes), s.FetchMaxWait, s.IsolationLevel, human.Thousands(s.TailRate),
		s.TailProducers, s.TailDuration)
}

// shapeText is `shape NAME: ` for Label, or nothing for a file that did not record one.
func (s ConsumeSettings) shapeText() string {
	if s.Shape == "" {
		return ""
	}
	return "shape " + s.Shape + ": "
}

// byteSize is b in MiB or KiB when it is a whole number of them, else in bytes with
// thousands separators.
func byteSize(b int32) string {
	if b >= 1<<20 && b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	if b >= 1<<10 && b%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return human.Thousands(float64(b)) + " B"
}

// ConsumeRun is the consume phase of one run.
type ConsumeRun struct {
	// Skipped says why the phase did not run (inlet-discard keeps nothing to read).
	Skipped string `json:"skipped,omitempty"`
	// Error is why the phase has no figures; the phases that completed keep theirs.
	Error string      `json:"error,omitempty"`
	Fill  *FillResult `json:"fill,omitempty"`
	// TierWaitSeconds is how long after the fill the remote tier took to hold every batch of a
	// tiered target's topics, none left on local disk (0: not tiered).
	TierWaitSeconds float64        `json:"tier_wait_seconds,omitempty"`
	Catchup         *CatchupResult `json:"catchup,omitempty"`
	Tail            *TailResult    `json:"tail,omitempty"`
}

// OK reports whether the phase's figures count toward the medians.
func (c *ConsumeRun) OK() bool {
	return c != nil && c.Skipped == "" && c.Error == "" && c.Catchup != nil && c.Tail != nil
}

// FillResult is loadgen's outcome of the fill.
type FillResult struct {
	Acked         uint64            `json:"acked"`
	Failed        uint64            `json:"failed"`
	Seconds       float64           `json:"seconds"`
	RecordsPerSec float64           `json:"records_per_sec"`
	Errors        map[string]uint64 `json:"errors,omitempty"`
}

// CatchupResult is the catch-up read. Seconds run from just before the consumer clients are
// created (metadata, ListOffsets and the first fetch included) to the last record.
type CatchupResult struct {
	// Expected is the sum over partitions of high watermark minus start offset, listed after
	// the fill; Records were read, Bytes their values.
	Expected         uint64  `json:"expected"`
	Records          uint64  `json:"records"`
	Bytes            uint64  `json:"value_bytes"`
	Seconds          float64 `json:"seconds"`
	RecordsPerSec    float64 `json:"records_per_sec"`
	MBPerSec         float64 `json:"mb_per_sec"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	// RecordsPerCPUSecond is Records / ServerCPUSeconds: read efficiency.
	RecordsPerCPUSecond float64 `json:"records_per_cpu_second"`
	// ServerPeakRSSBytes is the server's peak RSS during the read (VmHWM, reset at its start).
	ServerPeakRSSBytes int64 `json:"server_peak_rss_bytes"`
	// ClientCPUSeconds is bench's own CPU over the same window (the consumers; its producers
	// are idle), and MachineBusy the share of every CPU's time that was busy: near 1, the
	// read is bound by the CPUs, and the clients' share sets the pace as much as the broker's.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	MachineBusy      float64 `json:"machine_busy"`
	// MachineSteal is the share of the machine's CPU time its hypervisor gave to others (in
	// MachineBusy): a run with much of it measured a slower machine.
	MachineSteal float64 `json:"machine_steal"`
}

// TailResult is the tail: a fixed offered rate produced while the consumers follow.
type TailResult struct {
	OfferedRate float64 `json:"offered_rate"`
	Sent        uint64  `json:"sent"`
	Acked       uint64  `json:"acked"`
	Failed      uint64  `json:"failed"`
	// Unresolved records were sent but neither acknowledged nor failed after the clients closed.
	Unresolved uint64 `json:"unresolved"`
	Received   uint64 `json:"received"`
	// Malformed records were received without a plausible stamp.
	Malformed uint64            `json:"malformed"`
	Errors    map[string]uint64 `json:"errors,omitempty"`
	// Seconds runs from the first intended send to the moment every acknowledged record was
	// received (or the drain timeout); the CPU and the delivered rate are over it.
	Seconds          float64 `json:"seconds"`
	RecordsPerSec    float64 `json:"records_per_sec"` // received / Seconds
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	// ServerCPUCores is ServerCPUSeconds / Seconds: the broker's share of a core at this rate.
	ServerCPUCores float64 `json:"server_cpu_cores"`
	// ServerPeakRSSBytes is the server's peak RSS during the tail (VmHWM, reset at its start).
	ServerPeakRSSBytes int64 `json:"server_peak_rss_bytes"`
	// ClientCPUSeconds, MachineBusy and MachineSteal: as for the catch-up, over the tail's
	// window; here bench's CPU is its producers' and its consumers'.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	MachineBusy      float64 `json:"machine_busy"`
	MachineSteal     float64 `json:"machine_steal"`
	// E2E is per received record, from its intended send time to the PollFetches return that
	// delivered it.
	E2E          loadgen.LatencySummary    `json:"e2e"`
	E2EHistogram []loadgen.HistogramBucket `json:"e2e_histogram,omitempty"`
}

// check returns why the tail's counts are wrong: every sent record must end acknowledged and
// be received once, and nothing may fail.
func (t *TailResult) check() error {
	switch {
	case t.Failed > 0:
		return fmt.Errorf("%d records failed: %v", t.Failed, t.Errors)
	case t.Unresolved > 0:
		return fmt.Errorf("%d records neither acknowledged nor failed", t.Unresolved)
	case t.Acked == 0:
		return errors.New("nothing acknowledged")
	case t.Malformed > 0:
		return fmt.Errorf("%d records received without a valid send time", t.Malformed)
	case t.Received < t.Acked:
		return fmt.Errorf("%d of %d acknowledged records never received", t.Acked-t.Received, t.Acked)
	case t.Received > t.Acked:
		return fmt.Errorf("%d records received, more than the %d acknowledged", t.Received, t.Acked)
	}
	return nil
}

// fillCheck returns why a fill is not a complete, fully acknowledged set of want records.
func fillCheck(res *loadgen.Result, want int64) error {
	switch {
	case res.Interrupted:
		return fmt.Errorf("stopped with %d of %d records acknowledged", res.Acked, want)
	case res.FlushTimedOut:
		return fmt.Errorf("acks still outstanding %v after sending stopped", res.Settings.FlushTimeout)
	case res.Failed > 0:
		return fmt.Errorf("%d records failed: %v", res.Failed, res.Errors)
	case res.Acked != uint64(want):
		return fmt.Errorf("%d of %d records acknowledged", res.Acked, want)
	}
	return nil
}

// summarizeLatency is loadgen's summary of a histogram snapshot.
func summarizeLatency(h *loadgen.HistogramSnapshot) loadgen.LatencySummary {
	return loadgen.LatencySummary{Count: h.Total, MeanUs: h.Mean(), P50Us: h.Quantile(0.50), P90Us: h.Quantile(0.90),
		P99Us: h.Quantile(0.99), P999Us: h.Quantile(0.999), MaxUs: h.Max}
}

// ConsumeSummary is the medians of the successful consume phases of one point.
type ConsumeSummary struct {
	Runs   int `json:"runs"`
	Failed int `json:"failed_runs"`
	// Skipped is the reason when every run of the point skipped the phase.
	Skipped string `json:"skipped,omitempty"`

	CatchupRecordsPerSec       float64 `json:"catchup_records_per_sec"`
	CatchupMBPerSec            float64 `json:"catchup_mb_per_sec"`
	CatchupRecordsPerCPUSecond float64 `json:"catchup_records_per_cpu_second"`
	CatchupPeakRSSBytes        float64 `json:"catchup_peak_rss_bytes"`
	CatchupClientCPUSeconds    float64 `json:"catchup_client_cpu_seconds"`
	TailRecordsPerSec          float64 `json:"tail_records_per_sec"`
	TailServerCPUCores         float64 `json:"tail_server_cpu_cores"`
	TailP50Us                  float64 `json:"tail_e2e_p50_us"`
	TailP99Us                  float64 `json:"tail_e2e_p99_us"`
	TailP999Us                 float64 `json:"tail_e2e_p999_us"`
	TailMaxUs                  float64 `json:"tail_e2e_max_us"`
	TailPeakRSSBytes           float64 `json:"tail_peak_rss_bytes"`

	// Ratios to the baseline's medians: catch-up records/s, catch-up records per CPU-second,
	// and tail CPU (cores at the same offered rate).
	CatchupRecordsPerSecRatio *float64 `json:"catchup_records_per_sec_ratio,omitempty"`
	CatchupPerCPURatio        *float64 `json:"catchup_records_per_cpu_second_ratio,omitempty"`
	TailCPURatio              *float64 `json:"tail_cpu_ratio,omitempty"`
}

// Measured reports whether the phase ran and at least one run succeeded: its medians exist.
func (c *ConsumeSummary) Measured() bool { return c != nil && c.Skipped == "" && c.Runs > c.Failed }

// summarizeConsume is the ConsumeSummary of runs, nil when none had a consume phase.
func summarizeConsume(runs []*Run) *ConsumeSummary {
	var ok []*ConsumeRun
	c := &ConsumeSummary{}
	skipped := map[string]bool{}
	for _, r := range runs {
		switch {
		case r.Consume == nil:
			continue
		case r.Consume.Skipped != "":
			skipped[r.Consume.Skipped] = true
		case r.Consume.OK():
			ok = append(ok, r.Consume)
		}
		c.Runs++
	}
	if c.Runs == 0 {
		return nil
	}
	if len(ok) == 0 && len(skipped) > 0 {
		c.Skipped = strings.Join(slices.Sorted(maps.Keys(skipped)), "; ")
	}
	c.Failed = c.Runs - len(ok)
	med := func(f func(*ConsumeRun) float64) float64 {
		xs := make([]float64, len(ok))
		for i, r := range ok {
			xs[i] = f(r)
		}
		m, _ := median(xs)
		return m
	}
	c.CatchupRecordsPerSec = med(func(r *ConsumeRun) float64 { return r.Catchup.RecordsPerSec })
	c.CatchupMBPerSec = med(func(r *ConsumeRun) float64 { return r.Catchup.MBPerSec })
	c.CatchupRecordsPerCPUSecond = med(func(r *ConsumeRun) float64 { return r.Catchup.RecordsPerCPUSecond })
	c.CatchupClientCPUSeconds = med(func(r *ConsumeRun) float64 { return r.Catchup.ClientCPUSeconds })
	c.TailRecordsPerSec = med(func(r *ConsumeRun) float64 { return r.Tail.RecordsPerSec })
	c.TailServerCPUCores = med(func(r *ConsumeRun) float64 { return r.Tail.ServerCPUCores })
	c.TailP50Us = med(func(r *ConsumeRun) float64 { return float64(r.Tail.E2E.P50Us) })
	c.TailP99Us = med(func(r *ConsumeRun) float64 { return float64(r.Tail.E2E.P99Us) })
	c.TailP999Us = med(func(r *ConsumeRun) float64 { return float64(r.Tail.E2E.P999Us) })
	c.TailMaxUs = med(func(r *ConsumeRun) float64 { return float64(r.Tail.E2E.MaxUs) })
	c.CatchupPeakRSSBytes = med(func(r *ConsumeRun) float64 { return float64(r.Catchup.ServerPeakRSSBytes) })
	c.TailPeakRSSBytes = med(func(r *ConsumeRun) float64 { return float64(r.Tail.ServerPeakRSSBytes) })
	return c
}

// consumeRatios sets the ratios of every measured consume summary to base's.
func consumeRatios(out []Summary, base *ConsumeSummary) {
	if !base.Measured() {
		return
	}
	for i := range out {
		c := out[i].Consume
		if !c.Measured() {
			continue
		}
		if r, ok := ratio(c.CatchupRecordsPerSec, base.CatchupRecordsPerSec); ok {
			c.CatchupRecordsPerSecRatio = &r
		}
		if r, ok := ratio(c.CatchupRecordsPerCPUSecond, base.CatchupRecordsPerCPUSecond); ok {
			c.CatchupPerCPURatio = &r
		}
		if r, ok := ratio(c.TailServerCPUCores, base.TailServerCPUCores); ok {
			c.TailCPURatio = &r
		}
	}
}

// estimate guesses the phase's wall time for the progress line: a fill at 300,000 records/s,
// a catch-up at 1,000,000, the tail and its drain.
func (s ConsumeSettings) estimate() time.Duration {
	return time.Duration(float64(s.FillRecords)/300e3*float64(time.Second)) +
		time.Duration(float64(s.FillRecords)/1e6*float64(time.Second)) + s.TailDuration + 3*time.Second
}

func (p *progress) endConsume(c *ConsumeRun) {
	switch {
	case c == nil:
	case c.Skipped != "":
		fmt.Fprintf(p.w, "bench %s:        consume: skipped (%s)\n", p.kind, c.Skipped)
	case c.Error != "":
		fmt.Fprintf(p.w, "bench %s:        consume FAILED: %s\n", p.kind, c.Error)
	default:
		cu, t := c.Catchup, c.Tail
		fmt.Fprintf(p.w, "bench %s:        consume: fill %s records at %s/s; catch-up %s records/s, %.1f MB/s, %s records per server CPU-s, peak RSS %s, server %.2f CPU-s, clients %.2f CPU-s, machine %.0f%% busy (%.0f%% stolen); tail %s records/s, server %.2f cores, clients %.2f cores, machine %.0f%% busy (%.0f%% stolen), e2e p50 %s, p99 %s, p99.9 %s, max %s, peak RSS %s\n",
			p.kind, human.Thousands(float64(c.Fill.Acked)), human.Thousands(c.Fill.RecordsPerSec), human.Thousands(cu.RecordsPerSec), cu.MBPerSec,
			human.Thousands(cu.RecordsPerCPUSecond), human.MiB(float64(cu.ServerPeakRSSBytes)), cu.ServerCPUSeconds, cu.ClientCPUSeconds, 100*cu.MachineBusy, 100*cu.MachineSteal,
			human.Thousands(t.RecordsPerSec), t.ServerCPUCores, t.clientCores(), 100*t.MachineBusy, 100*t.MachineSteal, human.Micros(float64(t.E2E.P50Us)),
			human.Micros(float64(t.E2E.P99Us)), human.Micros(float64(t.E2E.P999Us)), human.Micros(float64(t.E2E.MaxUs)), human.MiB(float64(t.ServerPeakRSSBytes)))
	}
}

// clientCores is bench's share of a core over the tail.
func (t *TailResult) clientCores() float64 {
	if t.Seconds <= 0 {
		return 0
	}
	return t.ClientCPUSeconds / t.Seconds
}

// writeConsumeTable prints the consume medians of f, if it has a consume phase.
func writeConsumeTable(w io.Writer, f *File) {
	if f.Consume == nil {
		return
	}
	fmt.Fprintf(w, "\nconsume: %s\n", f.Consume.Label())
	header := []string{"target", "runs", "catch-up rec/s", "MB/s", "rec/CPU-s", "clients CPU-s", "catch-up RSS", "tail rec/s", "tail CPU", "e2e p50", "e2e p99", "e2e p99.9", "e2e max", "tail RSS"}
	if f.Baseline != "" {
		header = append(header, "rec/s ratio", "rec/CPU-s ratio", "tail CPU ratio")
	}
	rows := [][]string{header}
	for _, s := range f.Summary {
		c := s.Consume
		if c == nil {
			continue
		}
		row := []string{s.Target, c.RunsText()}
		if c.Measured() {
			row = append(row, human.Thousands(c.CatchupRecordsPerSec), human.Fixed(c.CatchupMBPerSec, 1), human.Thousands(c.CatchupRecordsPerCPUSecond),
				human.Fixed(c.CatchupClientCPUSeconds, 2), human.MiB(c.CatchupPeakRSSBytes), human.Thousands(c.TailRecordsPerSec), human.Fixed(c.TailServerCPUCores, 2)+" cores", human.Micros(c.TailP50Us),
				human.Micros(c.TailP99Us), human.Micros(c.TailP999Us), human.Micros(c.TailMaxUs), human.MiB(c.TailPeakRSSBytes))
		} else {
			row = append(row, "–", "–", "–", "–", "–", "–", "–", "–", "–", "–", "–", "–")
		}
		if f.Baseline != "" {
			row = append(row, human.Ratio(c.CatchupRecordsPerSecRatio), human.Ratio(c.CatchupPerCPURatio), human.Ratio(c.TailCPURatio))
		}
		rows = append(rows, row)
	}
	writeAligned(w, rows)
}

// RunsText prints the phase's runs: why it was skipped, or the count with the failed ones.
func (c *ConsumeSummary) RunsText() string {
	if c.Skipped != "" {
		return "n/a: " + c.Skipped
	}
	return human.Runs(c.Runs, c.Failed)
}
