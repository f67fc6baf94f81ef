package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"inlet/bench/proc"
	"inlet/loadgen"
)

// Result kinds: one per subcommand that measures.
const (
	KindSweep   = "sweep"
	KindCompare = "compare"
	KindLatency = "latency"
	KindChaos   = "chaos"
	KindScale   = "scale"
)

// resultKinds are the kinds readFiles reads.
var resultKinds = []string{KindSweep, KindCompare, KindLatency, KindChaos, KindScale}

// File is one invocation of a measuring subcommand, written to results/<kind>-<time>.json.
// It keeps every run, failed ones included, and the medians computed from them.
type File struct {
	Kind string `json:"kind"`
	// Label names the load and configuration the numbers belong to ("idempotent, 16
	// producers, 100-byte records, segments"); the report groups files by it.
	Label string `json:"label"`
	// Command is the command line, as it would be typed from the repository root.
	Command string            `json:"command"`
	Flags   map[string]string `json:"flags"` // every flag of the subcommand, defaults included
	Machine proc.Machine      `json:"machine"`

	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Baseline is the target the ratios in Summary are relative to (compare); Targets are
	// the commands measured, {port} and {dir} standing for each run's port and data directory,
	// paths inside the repository relative to it.
	Baseline string        `json:"baseline,omitempty"`
	Targets  []proc.Target `json:"targets,omitempty"`
	// Interrupted: the run was stopped (SIGINT) before every point was measured.
	Interrupted bool `json:"interrupted,omitempty"`
	// Notes are warnings about the measurement itself (a data directory on tmpfs, ...).
	Notes []string `json:"notes,omitempty"`

	Runs    []Run         `json:"runs,omitempty"`
	Summary []Summary     `json:"summary,omitempty"`
	Chaos   *ChaosOutcome `json:"chaos,omitempty"`
	// Consume is how the consume phase of `bench compare --consume` ran (consume.go); nil
	// without one. Each run's figures are in its Run.Consume.
	Consume *ConsumeSettings `json:"consume,omitempty"`
	// Scale is what `bench scale` measured (scale.go); each run names its point in
	// Run.Dimension and Run.Point.
	Scale *ScaleSettings `json:"scale,omitempty"`

	// Name is the file's path relative to the repository root (results/...), set when the
	// file is written or read; not stored.
	Name string `json:"-"`
}

// Run is one broker process measured under one loadgen run.
type Run struct {
	Target  string    `json:"target"`
	Workers int       `json:"workers,omitempty"` // --workers of inlet; 0: the broker's default
	Repeat  int       `json:"repeat"`            // 1-based
	Rate    float64   `json:"rate,omitempty"`    // offered records/s; 0: flat out
	Argv    []string  `json:"server_argv"`
	DataFS  string    `json:"data_fs"` // file system of the data directory
	Started time.Time `json:"started"`
	// Dimension and Point place a run of bench scale: the load parameter changed from the
	// base ("partitions") and its value at this run ("1000").
	Dimension string `json:"dimension,omitempty"`
	Point     string `json:"point,omitempty"`
	// Error is why the run produced no numbers (or numbers to distrust: a non-clean stop).
	Error string `json:"error,omitempty"`

	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // 10^6 bytes of record values a second
	P50Us         uint64  `json:"p50_us"`
	P99Us         uint64  `json:"p99_us"`
	P999Us        uint64  `json:"p999_us"`
	// RequestP50Us and RequestP99Us are produce request round trips (loadgen's
	// RequestRoundTrip): the broker's share of the ack latency, without linger.
	RequestP50Us uint64 `json:"request_p50_us,omitempty"`
	RequestP99Us uint64 `json:"request_p99_us,omitempty"`
	Acked        uint64 `json:"acked"`
	Failed       uint64 `json:"failed"`
	// AckedValueBytes is acked records × record size: the value bytes acknowledged. Keys are
	// nil; Kafka batch and record framing (about 70 bytes a batch, 7-10 a record) is not
	// counted. It is the denominator of WriteAmplification.
	AckedValueBytes uint64  `json:"acked_value_bytes"`
	ElapsedSeconds  float64 `json:"elapsed_seconds"`

	Server proc.ProcStats `json:"server"`
	// CPUSecondsPerMillion is Server.CPUSeconds per million acknowledged records.
	CPUSecondsPerMillion float64 `json:"cpu_seconds_per_million"`
	// WriteAmplification is Server.WriteBytes / AckedValueBytes.
	WriteAmplification float64        `json:"write_amplification"`
	Exit               proc.ExitStats `json:"exit"`

	Loadgen *loadgen.Result `json:"loadgen,omitempty"`

	// Tier is where the records of a tiered target's topic were as the produce run ended
	// (nil: the target's topic is not tiered, or the listing failed; TierError says why).
	Tier      *TierSplit `json:"tier,omitempty"`
	TierError string     `json:"tier_error,omitempty"`

	// Consume is the consume phase on the same broker after the produce run (compare
	// --consume); its figures do not enter the produce ones above.
	Consume *ConsumeRun `json:"consume,omitempty"`
}

// OK reports whether the run's numbers count toward the medians.
func (r *Run) OK() bool { return r.Error == "" && r.Acked > 0 }

// Summary is the medians of the successful runs of one point (target, workers, rate, and
// for bench scale dimension and point).
type Summary struct {
	Dimension string  `json:"dimension,omitempty"`
	Point     string  `json:"point,omitempty"`
	Target    string  `json:"target"`
	Workers   int     `json:"workers,omitempty"`
	Rate      float64 `json:"rate,omitempty"`
	Runs      int     `json:"runs"`
	Failed    int     `json:"failed_runs"`

	RecordsPerSec        float64 `json:"records_per_sec"`
	MBPerSec             float64 `json:"mb_per_sec"`
	P50Us                float64 `json:"p50_us"`
	P99Us                float64 `json:"p99_us"`
	P999Us               float64 `json:"p999_us"`
	RequestP50Us         float64 `json:"request_p50_us,omitempty"`
	RequestP99Us         float64 `json:"request_p99_us,omitempty"`
	CPUSecondsPerMillion float64 `json:"cpu_seconds_per_million"`
	PeakRSSBytes         float64 `json:"peak_rss_bytes"`
	WriteAmplification   float64 `json:"write_amplification"`

	// Ratios to the baseline target's medians (compare): records/s and CPU seconds per
	// record. Absent when there is no baseline or it has no successful run.
	RecordsPerSecRatio *float64 `json:"records_per_sec_ratio,omitempty"`
	CPUPerRecordRatio  *float64 `json:"cpu_per_record_ratio,omitempty"`

	// Consume is the medians of the point's consume phases; nil when it had none.
	Consume *ConsumeSummary `json:"consume,omitempty"`

	// Scale points only (summarizeScale): the median of the broker's CPU seconds, the
	// highest peak RSS of any run, and the failed records of all runs, failed ones included.
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	MaxPeakRSSBytes int64   `json:"max_peak_rss_bytes,omitempty"`
	FailedRecords   uint64  `json:"failed_records,omitempty"`
}

// ChaosOutcome is the outcome of a chaos run.
type ChaosOutcome struct {
	KillEverySeconds float64 `json:"kill_every_seconds"`
	Kills            int     `json:"kills"`
	// KillAt are the kill times in seconds since the producers started sending; RestartSeconds
	// how long each restart took until the broker accepted again.
	KillAt         []float64 `json:"kill_at_seconds"`
	RestartSeconds []float64 `json:"restart_seconds"`
	// UnexpectedExits counts times the broker was found dead without having been killed.
	UnexpectedExits int    `json:"unexpected_exits"`
	Seed            int64  `json:"seed"`
	Verdict         string `json:"verdict"`
	OK              bool   `json:"ok"`
	// Failures lists every reason OK is false.
	Failures []string        `json:"failures,omitempty"`
	Argv     []string        `json:"server_argv"`
	DataFS   string          `json:"data_fs"`
	Loadgen  *loadgen.Result `json:"loadgen,omitempty"`
}

// Summarize computes the medians of runs per point, in the order points first appear, and
// the ratios to baseline's medians when baseline is not empty.
func Summarize(runs []Run, baseline string) []Summary {
	type key struct {
		dimension, point string
		target           string
		workers          int
		rate             float64
	}
	var order []key
	groups := map[key][]*Run{}
	for i := range runs {
		r := &runs[i]
		k := key{r.Dimension, r.Point, r.Target, r.Workers, r.Rate}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		s := Summary{Dimension: k.dimension, Point: k.point, Target: k.target, Workers: k.workers, Rate: k.rate}
		var ok []*Run
		for _, r := range groups[k] {
			if r.OK() {
				ok = append(ok, r)
			}
		}
		s.Runs, s.Failed = len(groups[k]), len(groups[k])-len(ok)
		med := func(f func(*Run) float64) float64 {
			xs := make([]float64, len(ok))
			for i, r := range ok {
				xs[i] = f(r)
			}
			m, _ := median(xs)
			return m
		}
		s.RecordsPerSec = med(func(r *Run) float64 { return r.RecordsPerSec })
		s.MBPerSec = med(func(r *Run) float64 { return r.MBPerSec })
		s.P50Us = med(func(r *Run) float64 { return float64(r.P50Us) })
		s.P99Us = med(func(r *Run) float64 { return float64(r.P99Us) })
		s.P999Us = med(func(r *Run) float64 { return float64(r.P999Us) })
		s.RequestP50Us = med(func(r *Run) float64 { return float64(r.RequestP50Us) })
		s.RequestP99Us = med(func(r *Run) float64 { return float64(r.RequestP99Us) })
		s.CPUSecondsPerMillion = med(func(r *Run) float64 { return r.CPUSecondsPerMillion })
		s.PeakRSSBytes = med(func(r *Run) float64 { return float64(r.Server.PeakRSSBytes) })
		s.WriteAmplification = med(func(r *Run) float64 { return r.WriteAmplification })
		s.Consume = summarizeConsume(groups[k])
		out = append(out, s)
	}
	if baseline != "" {
		var base *Summary
		for i := range out {
			if out[i].Target == baseline && out[i].Runs > out[i].Failed {
				base = &out[i]
				break
			}
		}
		for i := range out {
			// The consume figures have their own successes: a produce run with a failed
			// record may still have read back well, and the other way round.
			if out[i].Target == baseline && out[i].Consume.Measured() {
				consumeRatios(out, out[i].Consume)
				break
			}
		}
		if base != nil {
			for i := range out {
				s := &out[i]
				if s.Runs == s.Failed {
					continue
				}
				if r, ok := ratio(s.RecordsPerSec, base.RecordsPerSec); ok {
					s.RecordsPerSecRatio = &r
				}
				if r, ok := ratio(s.CPUSecondsPerMillion, base.CPUSecondsPerMillion); ok {
					s.CPUPerRecordRatio = &r
				}
			}
		}
	}
	return out
}

// writeFile writes f as JSON into dir as <kind>-<UTC start time>.json (with a numeric suffix
// if that name is taken) and sets f.Name to the path relative to root.
func writeFile(root, dir string, f *File) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	b = append(compactLeaves(b), '\n')
	base := fmt.Sprintf("%s-%s", f.Kind, f.Started.UTC().Format("20060102-150405"))
	for i := 1; ; i++ {
		name := base + ".json"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.json", base, i)
		}
		path := filepath.Join(dir, name)
		fh, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = fh.Write(b)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		f.Name = RelPath(root, path)
		return path, nil
	}
}

// leafObject matches an indented JSON object of one to five scalar fields (a histogram
// bucket, a producer's counts, a partition range).
var leafObject = regexp.MustCompile(`\{\n\s+((?:"[^"\n]*": (?:"[^"\n]*"|[^,\n{}\[\]"]+),\n\s+){0,4}"[^"\n]*": (?:"[^"\n]*"|[^,\n{}\[\]"]+))\n\s*\}`)

var fieldBreak = regexp.MustCompile(`,\n\s+`)

// compactLeaves puts each small scalar-only object of indented JSON on one line: a run's
// latency histogram has hundreds of buckets, and one line each keeps the file short and still
// readable.
func compactLeaves(b []byte) []byte {
	return leafObject.ReplaceAllFunc(b, func(m []byte) []byte {
		inner := leafObject.FindSubmatch(m)[1]
		return append(append([]byte("{"), fieldBreak.ReplaceAll(inner, []byte(", "))...), '}')
	})
}

// ReadFiles reads every results JSON file in dir (kind-*.json), oldest first by start time.
// Files that are not result files are skipped; a result file that does not parse is an error.
func ReadFiles(root, dir string) ([]*File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*File
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var probe struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(b, &probe) != nil || !slices.Contains(resultKinds, probe.Kind) {
			continue
		}
		f := new(File)
		if err := json.Unmarshal(b, f); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		f.Name = RelPath(root, p)
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b *File) int {
		if c := a.Started.Compare(b.Started); c != 0 {
			return c
		}
		// sweep-<time>.json before sweep-<time>-2.json.
		return strings.Compare(strings.TrimSuffix(a.Name, ".json"), strings.TrimSuffix(b.Name, ".json"))
	})
	return out, nil
}

// RelPath is path relative to root, with slashes, when it is inside root; else path made
// absolute.
func RelPath(root, path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return path
}

// runCSVHeader is the header of results/{sweep,compare,latency}.csv: one row per run.
var runCSVHeader = []string{"file", "date", "git_commit", "git_dirty", "kind", "label", "target", "workers", "repeat",
	"producers", "idempotent", "record_size", "rate", "duration_s", "records_per_sec", "mb_per_sec", "p50_us", "p99_us",
	"p999_us", "cpu_s_per_million", "peak_rss_bytes", "write_amplification", "error"}

// scaleCSVHeader is the header of results/scale.csv: runCSVHeader and where the run lies.
var scaleCSVHeader = append(slices.Clone(runCSVHeader), "dimension", "point", "partitions", "topics", "compression",
	"failed_records", "cpu_seconds")

// chaosCSVHeader is the header of results/chaos.csv: one row per chaos run.
var chaosCSVHeader = []string{"file", "date", "git_commit", "git_dirty", "label", "producers", "idempotent", "duration_s",
	"kill_every_s", "kills", "acked", "lost", "duplicates", "verdict", "ok"}

// csvRows returns the CSV header and rows for f.
func csvRows(f *File) (header []string, rows [][]string) {
	common := []string{f.Name, f.Machine.Date.Format(time.RFC3339), f.Machine.GitCommit, strconv.FormatBool(f.Machine.GitDirty)}
	if f.Kind == KindChaos {
		c := f.Chaos
		if c == nil {
			return chaosCSVHeader, nil
		}
		var producers, idem, dur, acked, lost, dups string
		if c.Loadgen != nil {
			s := c.Loadgen.Settings
			producers, idem, dur = strconv.Itoa(s.Producers), strconv.FormatBool(s.Idempotent), fmtFloat(s.Duration.Seconds())
			if v := c.Loadgen.Verify; v != nil {
				acked, lost, dups = u64(v.Acked), u64(v.Lost), u64(v.Duplicates)
			}
		}
		row := append(slices.Clone(common), f.Label, producers, idem, dur, fmtFloat(c.KillEverySeconds), strconv.Itoa(c.Kills),
			acked, lost, dups, c.Verdict, strconv.FormatBool(c.OK))
		return chaosCSVHeader, [][]string{row}
	}
	header = runCSVHeader
	if f.Kind == KindScale {
		header = scaleCSVHeader
	}
	for _, r := range f.Runs {
		var producers, idem, size, dur, partitions, topics, compression string
		if r.Loadgen != nil {
			s := r.Loadgen.Settings
			producers, idem, size = strconv.Itoa(s.Producers), strconv.FormatBool(s.Idempotent), strconv.Itoa(s.RecordSize)
			dur = fmtFloat(s.Duration.Seconds())
			partitions, topics, compression = strconv.Itoa(s.Partitions), strconv.Itoa(max(s.Topics, 1)), s.Compression
		}
		row := append(slices.Clone(common), f.Kind, f.Label, r.Target, strconv.Itoa(r.Workers), strconv.Itoa(r.Repeat),
			producers, idem, size, fmtFloat(r.Rate), dur, fmtFloat(r.RecordsPerSec), fmtFloat(r.MBPerSec),
			u64(r.P50Us), u64(r.P99Us), u64(r.P999Us), fmtFloat(r.CPUSecondsPerMillion),
			strconv.FormatInt(r.Server.PeakRSSBytes, 10), fmtFloat(r.WriteAmplification), r.Error)
		if f.Kind == KindScale {
			row = append(row, r.Dimension, r.Point, partitions, topics, compression, u64(r.Failed), fmtFloat(r.Server.CPUSeconds))
		}
		rows = append(rows, row)
	}
	return header, rows
}

// appendCSV appends f's rows to dir/<kind>.csv, writing the header first if the file is new.
// A file whose header is not this version's is left alone: appending would misalign columns.
func appendCSV(dir string, f *File) (string, error) {
	header, rows := csvRows(f)
	path := filepath.Join(dir, f.Kind+".csv")
	existing, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return path, err
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if len(existing) == 0 {
		_ = w.Write(header)
	} else {
		first, _, _ := strings.Cut(string(existing), "\n")
		got, err := csv.NewReader(strings.NewReader(first)).Read()
		if err != nil || !slices.Equal(got, header) {
			return path, fmt.Errorf("%s has a different header (%q); not appending to it", path, first)
		}
		if existing[len(existing)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	for _, r := range rows {
		_ = w.Write(r)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return path, err
	}
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return path, err
	}
	_, err = fh.Write(buf.Bytes())
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return path, err
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
