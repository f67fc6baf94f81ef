package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"inlet/bench/human"
	"inlet/bench/proc"
	"inlet/bytesize"
	"inlet/loadgen"
)

// Scale dimensions: the load parameter one curve of `bench scale` changes, the others staying
// at the base point.
const (
	DimPartitions  = "partitions"  // partitions of the one topic
	DimTopics      = "topics"      // topics of one partition each
	DimProducers   = "producers"   // producer clients, one connection each
	DimRecordSize  = "record-size" // record value bytes
	DimCompression = "compression" // the producers' batch compression
)

// ScaleDimensions are the dimensions in the order they are measured and reported.
var ScaleDimensions = []string{DimPartitions, DimTopics, DimProducers, DimRecordSize, DimCompression}

// DefaultScalePoints are each dimension's points when none are given.
var DefaultScalePoints = map[string][]string{
	DimPartitions:  {"16", "1000", "10000"},
	DimTopics:      {"1000"},
	DimProducers:   {"16", "256", "1000"},
	DimRecordSize:  {"100", "1024", "16384"},
	DimCompression: {"none", "lz4", "zstd"},
}

// ScaleTitles head the report's and the summary's tables.
var ScaleTitles = map[string]string{
	DimPartitions:  "Partitions in one topic",
	DimTopics:      "Topics of one partition each",
	DimProducers:   "Producer clients (one connection each)",
	DimRecordSize:  "Record size (value bytes)",
	DimCompression: "Producer compression",
}

// DefaultInflightBudget is inlet's default --inflight-budget; rssHeadroom is what a broker may
// hold beyond it before a scale point is flagged (code, runtime, per-partition and
// per-connection state).
const (
	DefaultInflightBudget = 256 << 20
	rssHeadroom           = 256 << 20
)

// scaleBufferedBytes bounds the record values all producers of a scale point may buffer:
// loadgen's default (100,000 records per producer) at the base point of 16 producers and
// 100-byte records. Kept per producer at higher producer counts or record sizes it would let
// 1000 producers, or 16 producers of 16 KiB records, buffer tens of GB flat out (loadgen has
// no byte limit), so those points get fewer records per producer (scaleLoad).
const scaleBufferedBytes = loadgen.DefaultProducers * loadgen.DefaultMaxBufferedRecords * loadgen.DefaultRecordSize

// minScaleBuffered is the fewest records a producer of a scale point buffers: at 50 ms an ack
// that still allows 2,000 records/s per producer.
const minScaleBuffered = 100

// ScaleOptions are the flags of `bench scale`.
type ScaleOptions struct {
	Env
	// Base is the load of every point but for the one parameter its dimension changes.
	Base Load
	// Dimensions to measure, in ScaleDimensions' order or as given; Points their values (a
	// dimension missing from Points takes DefaultScalePoints).
	Dimensions []string
	Points     map[string][]string
	Repeat     int
	// Targets, Peers, Storage, Workers, InletArgs and KfakeBin are as in CompareOptions; a
	// built-in target's --default-partitions and a peer's {partitions} follow each point.
	Targets   []string
	Peers     []proc.Target
	Storage   string
	Workers   int
	InletArgs []string
	KfakeBin  string
	// RSSLimitBytes flags a run whose broker's peak RSS is above it; 0: inlet's
	// --inflight-budget (from InletArgs, else its default) plus 256 MiB.
	RSSLimitBytes int64
}

// ScaleSettings is what a scale file measured.
type ScaleSettings struct {
	Dimensions []ScaleDimension `json:"dimensions"`
	Base       ScaleBase        `json:"base"`
	// RSSLimitBytes: a point whose broker peak RSS went above it is flagged.
	RSSLimitBytes int64 `json:"rss_limit_bytes"`
}

// ScaleDimension is one measured dimension and its points, in order.
type ScaleDimension struct {
	Name   string   `json:"name"`
	Points []string `json:"points"`
}

// ScaleBase is the base point's load.
type ScaleBase struct {
	Producers       int     `json:"producers"`
	Partitions      int     `json:"partitions"`
	RecordSize      int     `json:"record_size"`
	Compression     string  `json:"compression"`
	Idempotent      bool    `json:"idempotent"`
	DurationSeconds float64 `json:"duration_seconds"`
}

func (b ScaleBase) String() string {
	mode := "plain"
	if b.Idempotent {
		mode = "idempotent"
	}
	return fmt.Sprintf("%d %s producers, %d partitions in one topic, %d-byte records, compression %s, %gs per run",
		b.Producers, mode, b.Partitions, b.RecordSize, b.Compression, b.DurationSeconds)
}

// Has reports whether the settings measured dimension dim.
func (s *ScaleSettings) Has(dim string) bool {
	return s != nil && slices.ContainsFunc(s.Dimensions, func(d ScaleDimension) bool { return d.Name == dim })
}

// ParseDimensions parses a comma-separated list of dimensions; "" and "all" are every one.
func ParseDimensions(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return slices.Clone(ScaleDimensions), nil
	}
	var out []string
	for d := range strings.SplitSeq(s, ",") {
		d = strings.TrimSpace(d)
		switch {
		case d == "":
			continue
		case !slices.Contains(ScaleDimensions, d):
			return nil, fmt.Errorf("unknown dimension %q (known: %s)", d, strings.Join(ScaleDimensions, ", "))
		case slices.Contains(out, d):
			return nil, fmt.Errorf("dimension %q given twice", d)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no dimension")
	}
	return out, nil
}

// ParsePoints parses a comma-separated list of dim's points: positive integers, or for
// compression loadgen's codec names.
func ParsePoints(dim, s string) ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		if dim == DimCompression {
			if !slices.Contains(loadgen.Compressions, p) {
				return nil, fmt.Errorf("compression %q is not one of %s", p, strings.Join(loadgen.Compressions, ", "))
			}
		} else if n, err := strconv.Atoi(p); err != nil || n < 1 {
			return nil, fmt.Errorf("%s point %q is not a positive integer", dim, p)
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("%s point %q given twice", dim, p)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s points", dim)
	}
	return out, nil
}

// scalePoint is one point of one dimension and its load.
type scalePoint struct {
	dimension, value string
	load             Load
}

// scaleLoad is base with dimension dim set to value. Unless base names MaxBufferedRecords, the
// producers' buffers are cut so that all of them together hold at most scaleBufferedBytes of
// values; the base point keeps loadgen's default.
func scaleLoad(base Load, dim, value string) (Load, error) {
	l := base
	var n int
	if dim != DimCompression {
		var err error
		if n, err = strconv.Atoi(value); err != nil || n < 1 {
			return l, fmt.Errorf("%s point %q is not a positive integer", dim, value)
		}
	}
	switch dim {
	case DimPartitions:
		l.Partitions = n
	case DimTopics:
		l.Topics, l.Partitions = n, 1
	case DimProducers:
		l.Producers = n
	case DimRecordSize:
		l.RecordSize = n
	case DimCompression:
		l.Compression = value
	default:
		return l, fmt.Errorf("unknown dimension %q", dim)
	}
	if base.MaxBufferedRecords == 0 && l.Producers > 0 && l.RecordSize > 0 {
		per := scaleBufferedBytes / (l.Producers * l.RecordSize)
		if per < loadgen.DefaultMaxBufferedRecords {
			l.MaxBufferedRecords = max(per, minScaleBuffered)
		}
	}
	return l, nil
}

// scalePoints lists the points of dims in order, each checked by loadgen's own validation.
func scalePoints(base Load, dims []string, points map[string][]string) ([]scalePoint, error) {
	var out []scalePoint
	for _, dim := range dims {
		values := points[dim]
		if len(values) == 0 {
			values = DefaultScalePoints[dim]
		}
		for _, v := range values {
			l, err := scaleLoad(base, dim, v)
			if err != nil {
				return nil, err
			}
			if _, err := l.Config("127.0.0.1:9092", 0).Settings(); err != nil {
				return nil, fmt.Errorf("%s %s: %w", dim, v, err)
			}
			out = append(out, scalePoint{dim, v, l})
		}
	}
	return out, nil
}

// InflightBudget returns inlet's --inflight-budget among args (--inflight-budget=X or
// --inflight-budget X, the last one winning), or its default.
func InflightBudget(args []string) (int64, error) {
	budget := int64(DefaultInflightBudget)
	for i, a := range args {
		var v string
		switch {
		case strings.HasPrefix(a, "--inflight-budget="), strings.HasPrefix(a, "-inflight-budget="):
			_, v, _ = strings.Cut(a, "=")
		case (a == "--inflight-budget" || a == "-inflight-budget") && i+1 < len(args):
			v = args[i+1]
		default:
			continue
		}
		n, err := bytesize.Parse(v)
		if err != nil {
			return 0, fmt.Errorf("--inflight-budget %q: %w", v, err)
		}
		budget = n
	}
	return budget, nil
}

// Scale measures produce throughput and broker cost along each dimension, one load parameter
// changed at a time from the base. At each point the targets alternate (A B A B ...) Repeat
// times, each run on a fresh broker and data directory, as in Compare; the points run one
// after the other (point-major), so that a point's runs are close together in time and its
// ratios compare like with like. The result file holds every run; the summary has per point
// and target the medians and the ratios to inlet (or the first target).
func Scale(ctx context.Context, o ScaleOptions) (*File, error) {
	if o.Repeat < 1 {
		return nil, errors.New("need at least one repeat")
	}
	if len(o.Dimensions) == 0 {
		o.Dimensions = ScaleDimensions
	}
	if err := checkTargetNames(o.Targets); err != nil {
		return nil, err
	}
	points, err := scalePoints(o.Base, o.Dimensions, o.Points)
	if err != nil {
		return nil, err
	}
	if o.RSSLimitBytes == 0 {
		budget, err := InflightBudget(o.InletArgs)
		if err != nil {
			return nil, err
		}
		o.RSSLimitBytes = budget + rssHeadroom
	}
	if err := o.Env.Prepare(); err != nil {
		return nil, err
	}
	co := CompareOptions{Env: o.Env, Targets: o.Targets, Peers: o.Peers, Storage: o.Storage, Workers: o.Workers,
		InletArgs: o.InletArgs, KfakeBin: o.KfakeBin}
	targets, err := co.targets("{partitions}")
	if err != nil {
		return nil, err
	}

	base := o.Base
	base.Compression = cmp.Or(base.Compression, benchCompression)
	label := fmt.Sprintf("%s, %d partitions", base.Label(), base.Partitions)
	if slices.ContainsFunc(targets, func(t proc.Target) bool { return t.Name == TargetInlet }) {
		label += ", inlet on " + storageLabel(o.Storage)
	}
	f := o.Env.newFile(KindScale, label)
	for _, t := range targets {
		f.Targets = append(f.Targets, proc.Target{Name: t.Name, Argv: DisplayArgv(t.Argv, o.Env.Root), TopicConfigs: t.TopicConfigs})
	}
	f.Baseline = targets[0].Name
	if slices.ContainsFunc(targets, func(t proc.Target) bool { return t.Name == TargetInlet }) {
		f.Baseline = TargetInlet
	}
	f.Scale = &ScaleSettings{RSSLimitBytes: o.RSSLimitBytes, Base: ScaleBase{Producers: base.Producers,
		Partitions: base.Partitions, RecordSize: base.RecordSize, Compression: base.Compression,
		Idempotent: base.Idempotent, DurationSeconds: base.Duration.Seconds()}}
	for _, p := range points {
		if n := len(f.Scale.Dimensions); n == 0 || f.Scale.Dimensions[n-1].Name != p.dimension {
			f.Scale.Dimensions = append(f.Scale.Dimensions, ScaleDimension{Name: p.dimension})
		}
		d := &f.Scale.Dimensions[len(f.Scale.Dimensions)-1]
		d.Points = append(d.Points, p.value)
	}

	prog := newProgress(o.Env.Stderr, KindScale, len(points)*len(targets)*o.Repeat, perPointEstimate(o.Base, o.Env.Pause))
	for _, p := range points {
		for rep := 1; rep <= o.Repeat && ctx.Err() == nil; rep++ {
			for _, t := range targets {
				if ctx.Err() != nil {
					break
				}
				prog.begin("%s %s, %s, repeat %d/%d", p.dimension, p.value, t.Name, rep, o.Repeat)
				run := o.Env.measure(ctx, t, p.load, 0)
				run.Dimension, run.Point, run.Repeat = p.dimension, p.value, rep
				if t.Name == TargetInlet || t.Name == TargetInletDiscard {
					run.Workers = o.Workers
				}
				prog.end(&run)
				f.Runs = append(f.Runs, run)
				o.Env.pause(ctx)
			}
		}
	}
	f.Interrupted = ctx.Err() != nil
	f.Summary = SummarizeScale(f.Runs, f.Baseline)
	if err := o.Env.finish(f); err != nil {
		return f, err
	}
	writeScaleTables(o.Env.Stdout, f)
	return f, nil
}

// SummarizeScale is Summarize per point (dimension and value, in the order first run), each
// point's ratios relative to its own baseline runs, with the scale-only figures added.
func SummarizeScale(runs []Run, baseline string) []Summary {
	type key struct{ dim, point string }
	var order []key
	byPoint := map[key][]Run{}
	for _, r := range runs {
		k := key{r.Dimension, r.Point}
		if _, ok := byPoint[k]; !ok {
			order = append(order, k)
		}
		byPoint[k] = append(byPoint[k], r)
	}
	var out []Summary
	for _, k := range order {
		sums := Summarize(byPoint[k], baseline)
		for i := range sums {
			s := &sums[i]
			var cpu []float64
			for _, r := range byPoint[k] {
				if r.Target != s.Target {
					continue
				}
				s.FailedRecords += r.Failed
				s.MaxPeakRSSBytes = max(s.MaxPeakRSSBytes, r.Server.PeakRSSBytes)
				if r.OK() {
					cpu = append(cpu, r.Server.CPUSeconds)
				}
			}
			s.CPUSeconds, _ = median(cpu)
		}
		out = append(out, sums...)
	}
	return out
}

// ScaleFlags are the warnings of a point's summary: a broker above the RSS limit in any run,
// failed records.
func ScaleFlags(s *Summary, rssLimit int64) []string {
	var flags []string
	if rssLimit > 0 && s.MaxPeakRSSBytes > rssLimit {
		flags = append(flags, fmt.Sprintf("peak RSS %s > %s", human.MiB(float64(s.MaxPeakRSSBytes)), human.MiB(float64(rssLimit))))
	}
	if s.FailedRecords > 0 {
		flags = append(flags, fmt.Sprintf("%s failed records", human.Thousands(float64(s.FailedRecords))))
	}
	return flags
}

// DimensionSummaries are the summaries of dim, in point order.
func DimensionSummaries(sum []Summary, dim string) []Summary {
	var out []Summary
	for _, s := range sum {
		if s.Dimension == dim {
			out = append(out, s)
		}
	}
	return out
}

// writeScaleTables prints, per dimension, each point's medians per target and the ratios to
// the baseline.
func writeScaleTables(w io.Writer, f *File) {
	if f.Scale == nil {
		return
	}
	fmt.Fprintf(w, "%s: %s\nbase: %s; baseline %s; RSS flagged above %s\n", f.Kind, f.Label, f.Scale.Base,
		f.Baseline, human.MiB(float64(f.Scale.RSSLimitBytes)))
	for _, d := range f.Scale.Dimensions {
		fmt.Fprintf(w, "\n%s\n", ScaleTitles[d.Name])
		rows := [][]string{{d.Name, "target", "runs", "records/s", "MB/s", "CPU µs/rec", "CPU s", "peak RSS", "rec/s ratio", "CPU/rec ratio", "flags"}}
		for _, s := range DimensionSummaries(f.Summary, d.Name) {
			row := []string{s.Point, s.Target, human.Runs(s.Runs, s.Failed)}
			if s.Runs == s.Failed {
				row = append(row, "–", "–", "–", "–", "–")
			} else {
				row = append(row, human.Thousands(s.RecordsPerSec), human.Fixed(s.MBPerSec, 1), human.Fixed(s.CPUSecondsPerMillion, 2),
					human.Fixed(s.CPUSeconds, 1), human.MiB(s.PeakRSSBytes))
			}
			row = append(row, human.Ratio(s.RecordsPerSecRatio), human.Ratio(s.CPUPerRecordRatio),
				strings.Join(ScaleFlags(&s, f.Scale.RSSLimitBytes), "; "))
			rows = append(rows, row)
		}
		writeAligned(w, rows)
	}
}
