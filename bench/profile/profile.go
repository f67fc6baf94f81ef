// Package profile is `bench profile`: CPU and allocation profiles of inlet under the
// benchmarks' standard load.
//
// Run builds or takes inlet (bench.Env), starts it with --cpu-profile and --mem-profile on a
// fresh data directory (proc.Start), drives it with loadgen for the load's duration, stops it
// with SIGTERM so that it writes both profiles, and writes `go tool pprof -top` of each, the
// load's result and a line in profiles/README.md. One goroutine; no locks.
//
// Files: profile.go.
package profile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"inlet/bench"
	"inlet/bench/human"
	"inlet/bench/proc"
	"inlet/loadgen"
)

// Options are the flags of `bench profile`.
type Options struct {
	bench.Env
	Load bench.Load
	// OutDir receives cpu-<date>.pprof, mem-<date>.pprof, their `go tool pprof -top` text,
	// the load's result (load-<date>.json) and a line in README.md; empty: Root/profiles.
	OutDir    string
	Storage   string
	Workers   int
	InletArgs []string
}

// profileTopNodes is how many functions the -top text files list.
const profileTopNodes = 60

// Run starts inlet with --cpu-profile and --mem-profile under the standard load, stops it
// with SIGTERM (inlet writes both profiles at shutdown), renders `go tool pprof -top` of each
// and adds a line with the command to OutDir/README.md. It returns the files written.
func Run(ctx context.Context, o Options) ([]string, error) {
	if err := o.Env.Prepare(); err != nil {
		return nil, err
	}
	e := &o.Env
	if o.OutDir == "" {
		o.OutDir = filepath.Join(e.Root, "profiles")
	}
	out, err := filepath.Abs(o.OutDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	m := proc.DescribeMachine(e.Root)
	stamp := m.Date.Format("20060102-150405")
	cpu := filepath.Join(out, "cpu-"+stamp+".pprof")
	mem := filepath.Join(out, "mem-"+stamp+".pprof")
	extra := append([]string{"--cpu-profile", cpu, "--mem-profile", mem}, o.InletArgs...)
	target := e.InletTarget("inlet", o.Load, o.Storage, o.Workers, extra)

	base, err := os.MkdirTemp(e.TmpDir, "inlet-profile-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	dir, logPath := filepath.Join(base, "data"), filepath.Join(base, "server.log")
	srv, err := proc.Start(target, dir, logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.Stderr, "bench profile: %s against %s for %v\n", o.Load.Label(), srv.Addr(), o.Load.Duration)
	cfg := o.Load.Config(srv.Addr(), 0)
	cfg.Live = e.Live
	res, lerr := loadgen.Run(ctx, cfg)
	_, serr := srv.Stop()
	if lerr != nil {
		return nil, fmt.Errorf("loadgen: %w", lerr)
	}
	if serr != nil {
		return nil, fmt.Errorf("%w (log:\n%s)", serr, proc.LogTail(logPath, 20))
	}
	files := []string{cpu, mem}
	for _, p := range files {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("inlet wrote no profile: %w (log:\n%s)", err, proc.LogTail(logPath, 20))
		}
	}
	loadPath := filepath.Join(out, "load-"+stamp+".json")
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(loadPath, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	files = append(files, loadPath)
	// The mem profile is the allocs profile: alloc_space says what the hot path allocates over
	// the whole run, which is what a steady-state "allocates nothing" claim is about.
	for _, p := range []struct{ prof, index string }{{cpu, ""}, {mem, "alloc_space"}} {
		args := []string{"tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", profileTopNodes)}
		if p.index != "" {
			args = append(args, "-sample_index="+p.index)
		}
		args = append(args, e.InletBin, p.prof)
		cmd := exec.Command("go", args...)
		cmd.Dir = e.Root
		text, err := cmd.Output()
		if err != nil {
			return files, fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
		txt := strings.TrimSuffix(p.prof, ".pprof") + ".txt"
		if err := os.WriteFile(txt, text, 0o644); err != nil {
			return files, err
		}
		files = append(files, txt)
	}
	dirty := ""
	if m.GitDirty {
		dirty = " (dirty)"
	}
	line := fmt.Sprintf("- %s: `%s` — commit %s%s, %s, %d cores; inlet `%s`; load %s records/s, %.1f MB/s: [cpu](%s) ([top](%s)), [mem](%s) ([top](%s)), [load](%s)\n",
		m.Date.Format(time.RFC3339), e.Command, human.ShortCommit(m.GitCommit), dirty, m.CPUModel, m.Cores,
		human.CommandLine(profileDisplayArgv(target.Expand(srv.Port(), "DATA"), e.Root, cpu, mem)), human.Thousands(res.RecordsPerSec), res.MBPerSec,
		filepath.Base(cpu), strings.TrimSuffix(filepath.Base(cpu), ".pprof")+".txt",
		filepath.Base(mem), strings.TrimSuffix(filepath.Base(mem), ".pprof")+".txt", filepath.Base(loadPath))
	readme := filepath.Join(out, "README.md")
	if _, err := os.Stat(readme); errors.Is(err, fs.ErrNotExist) {
		head := "# Profiles\n\nCPU and allocation profiles of inlet under the standard load, written by `make profile`\n" +
			"(`bin/bench profile`). Open one with `go tool pprof -http :8080 bin/inlet profiles/cpu-<date>.pprof`;\n" +
			"the `.txt` files are `go tool pprof -top` of each (allocations by `alloc_space`).\n\n"
		if err := os.WriteFile(readme, []byte(head), 0o644); err != nil {
			return files, err
		}
	}
	fh, err := os.OpenFile(readme, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return files, err
	}
	_, err = fh.WriteString(line)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return append(files, readme), err
}

// profileDisplayArgv is DisplayArgv with the profile paths relative to root too.
func profileDisplayArgv(argv []string, root string, paths ...string) []string {
	out := bench.DisplayArgv(argv, root)
	for i, a := range out {
		for _, p := range paths {
			if a == p {
				out[i] = bench.RelPath(root, p)
			}
		}
	}
	return out
}
