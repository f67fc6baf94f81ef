package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"inlet/bench/proc"
)

// Built-in compare targets.
const (
	TargetInlet        = "inlet"         // durable, --storage as given
	TargetInletDiscard = "inlet-discard" // --storage discard: the protocol path without a log
	TargetKfake        = "kfake"         // franz-go's kfake, in memory
	TargetKfakeSync    = "kfake-sync"    // kfake with a data directory and an fsync per batch
)

// BuiltinTargets are the targets `bench compare` knows by name, in their default order.
var BuiltinTargets = []string{TargetInlet, TargetInletDiscard, TargetKfake, TargetKfakeSync}

// CompareOptions are the flags of `bench compare`.
type CompareOptions struct {
	Env
	Load   Load
	Repeat int
	// Targets are built-in target names; Peers further brokers (ParsePeer).
	Targets []string
	Peers   []proc.Target
	// Storage and Workers apply to the inlet target (0 workers: inlet's default).
	Storage   string
	Workers   int
	InletArgs []string
	// KfakeBin is the kfake-broker binary; empty: build Root/bin/kfake-broker if a kfake
	// target is measured.
	KfakeBin string
	// Consume adds the consume phase (consume.go) to every run; nil: none. Zero fields take
	// their defaults.
	Consume *ConsumeSettings
}

// ParsePeer parses `name=shell command` or `name[key=value,...]=shell command`. The command
// runs under /bin/sh -c with {port} and {dir} replaced by the loopback port to listen on and a
// fresh data directory, and {partitions} by the partition count of the run's load (for a
// broker's default partition count: bench scale changes it from point to point). The
// bracketed pairs are topic configs (Target.TopicConfigs): the harness creates the run's
// topics with them, e.g. `inlet-tier[remote.storage.enable=true,local.retention.bytes=0]=...`.
func ParsePeer(s string) (proc.Target, error) {
	var configs map[string]string
	if i := strings.IndexAny(s, "[="); i >= 0 && s[i] == '[' {
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			return proc.Target{}, fmt.Errorf("peer %q: '[' without ']' after the name", s)
		}
		var err error
		if configs, err = parseTopicConfigs(s[i+1 : i+j]); err != nil {
			return proc.Target{}, fmt.Errorf("peer %q: %w", s[:i], err)
		}
		if rest := s[i+j+1:]; !strings.HasPrefix(strings.TrimSpace(rest), "=") {
			return proc.Target{}, fmt.Errorf("peer %q: want '=' after the topic configs", s[:i])
		}
		s = s[:i] + s[i+j+1:]
	}
	name, cmd, ok := strings.Cut(s, "=")
	name, cmd = strings.TrimSpace(name), strings.TrimSpace(cmd)
	if !ok || name == "" || cmd == "" {
		return proc.Target{}, fmt.Errorf("peer %q: want name='command with {port}, {dir} and optionally {partitions}'", s)
	}
	if !strings.Contains(cmd, "{port}") {
		return proc.Target{}, fmt.Errorf("peer %q: the command must contain {port}", name)
	}
	if strings.ContainsAny(name, " \t/|[]") {
		return proc.Target{}, fmt.Errorf("peer %q: the name must not contain spaces, tabs, '/', '|', '[' or ']'", name)
	}
	return proc.Target{Name: name, Argv: []string{"/bin/sh", "-c", cmd}, TopicConfigs: configs}, nil
}

// parseTopicConfigs parses `key=value,key=value`: keys non-empty and given once, values
// without commas (none of Kafka's topic configs that a benchmark sets needs one).
func parseTopicConfigs(s string) (map[string]string, error) {
	configs := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("topic config %q: want key=value", pair)
		case strings.ContainsAny(k, " \t[]"):
			return nil, fmt.Errorf("topic config key %q has a space or a bracket", k)
		}
		if _, dup := configs[k]; dup {
			return nil, fmt.Errorf("topic config %q given twice", k)
		}
		configs[k] = v
	}
	return configs, nil
}

// Compare measures several brokers under the same load, alternating them (A B C A B C ...)
// so that drift of the machine spreads over every target, and reports each target's medians
// and its ratios to inlet's (or, without inlet, to the first target's).
func Compare(ctx context.Context, o CompareOptions) (*File, error) {
	if o.Repeat < 1 {
		return nil, errors.New("need at least one repeat")
	}
	if err := checkTargetNames(o.Targets); err != nil {
		return nil, err
	}
	var consume *ConsumeSettings
	if o.Consume != nil {
		c, err := o.Consume.Normalize(o.Load)
		if err != nil {
			return nil, err
		}
		consume = &c
	}
	if err := o.Env.Prepare(); err != nil {
		return nil, err
	}
	targets, err := o.targets(strconv.Itoa(o.Load.Partitions))
	if err != nil {
		return nil, err
	}

	label := o.Load.Label()
	if slices.ContainsFunc(targets, func(t proc.Target) bool { return t.Name == TargetInlet }) {
		label += ", inlet on " + storageLabel(o.Storage)
	}
	f := o.Env.newFile(KindCompare, label)
	for _, t := range targets {
		f.Targets = append(f.Targets, proc.Target{Name: t.Name, Argv: DisplayArgv(t.Argv, o.Env.Root), TopicConfigs: t.TopicConfigs})
	}
	f.Consume = consume
	f.Baseline = targets[0].Name
	if slices.ContainsFunc(targets, func(t proc.Target) bool { return t.Name == TargetInlet }) {
		f.Baseline = TargetInlet
	}
	perPoint := perPointEstimate(o.Load, o.Env.Pause)
	if consume != nil {
		perPoint += consume.estimate()
	}
	prog := newProgress(o.Env.Stderr, KindCompare, len(targets)*o.Repeat, perPoint)
	for rep := 1; rep <= o.Repeat && ctx.Err() == nil; rep++ {
		for _, t := range targets {
			if ctx.Err() != nil {
				break
			}
			prog.begin("%s, repeat %d/%d", t.Name, rep, o.Repeat)
			var then func(*proc.Server, *Run)
			if consume != nil {
				then = func(srv *proc.Server, run *Run) {
					if t.Name == TargetInletDiscard {
						run.Consume = &ConsumeRun{Skipped: "stores nothing to read back"}
						return
					}
					fmt.Fprintf(o.Env.Stderr, "bench %s:        produce run over; consume phase on the same broker (fill, catch-up, tail)\n", KindCompare)
					run.Consume = o.Env.consume(ctx, srv, t, o.Load, *consume)
				}
			}
			run := o.Env.measureThen(ctx, t, o.Load, 0, then)
			run.Repeat = rep
			if t.Name == TargetInlet || t.Name == TargetInletDiscard {
				run.Workers = o.Workers
			}
			prog.end(&run)
			prog.endConsume(run.Consume)
			f.Runs = append(f.Runs, run)
			o.Env.pause(ctx)
		}
	}
	if err := o.Env.finishRuns(ctx, f, f.Baseline); err != nil {
		return f, err
	}
	writeSummaryTable(o.Env.Stdout, f)
	return f, nil
}

// checkTargetNames refuses a name that is not a built-in target.
func checkTargetNames(names []string) error {
	for _, name := range names {
		if !slices.Contains(BuiltinTargets, name) {
			return fmt.Errorf("unknown target %q (built-in: %s; others with --peer)", name, strings.Join(BuiltinTargets, ", "))
		}
	}
	return nil
}

// targets are the commands of o.Targets and o.Peers, in that order; partitions is the
// brokers' --default-partitions, a count or {partitions} (replaced per run). It builds the
// kfake-broker binary once if a kfake target needs it and none was given. o.Env must be
// prepared.
func (o *CompareOptions) targets(partitions string) ([]proc.Target, error) {
	var targets []proc.Target
	for _, name := range o.Targets {
		switch name {
		case TargetInlet:
			targets = append(targets, o.Env.inletTargetWith(name, partitions, o.Storage, o.Workers, o.InletArgs))
		case TargetInletDiscard:
			targets = append(targets, o.Env.inletTargetWith(name, partitions, "discard", o.Workers, o.InletArgs))
		case TargetKfake, TargetKfakeSync:
			if o.KfakeBin == "" {
				bin, err := o.Env.build("kfake-broker", "inlet/cmd/kfake-broker")
				if err != nil {
					return nil, err
				}
				o.KfakeBin = bin
			}
			argv := []string{o.KfakeBin, "--listen", "127.0.0.1:{port}", "--default-partitions", partitions}
			if name == TargetKfakeSync {
				argv = append(argv, "--data-dir", "{dir}", "--sync")
			}
			targets = append(targets, proc.Target{Name: name, Argv: argv})
		}
	}
	for _, p := range o.Peers {
		if slices.ContainsFunc(targets, func(t proc.Target) bool { return t.Name == p.Name }) {
			return nil, fmt.Errorf("two targets named %q", p.Name)
		}
		targets = append(targets, p)
	}
	if len(targets) == 0 {
		return nil, errors.New("no targets")
	}
	return targets, nil
}

// DisplayArgv shortens the program path to one relative to root when it is inside it.
func DisplayArgv(argv []string, root string) []string {
	out := append([]string(nil), argv...)
	if len(out) > 0 && filepath.IsAbs(out[0]) && root != "" {
		out[0] = RelPath(root, out[0])
	}
	return out
}
