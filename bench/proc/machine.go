package proc

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where and from what a result was measured.
type Machine struct {
	CPUModel    string    `json:"cpu_model"`
	Cores       int       `json:"cores"` // logical CPUs the OS shows (runtime.NumCPU)
	MemoryBytes int64     `json:"memory_bytes"`
	Kernel      string    `json:"kernel"` // uname -r
	GoVersion   string    `json:"go_version"`
	Date        time.Time `json:"date"`
	GitCommit   string    `json:"git_commit"`
	// GitDirty: the work tree had changes (git status --porcelain was not empty), so the
	// commit alone does not say what was measured.
	GitDirty   bool `json:"git_dirty"`
	ClockTicks int  `json:"clock_ticks"` // getconf CLK_TCK, the unit of /proc CPU times
}

// DescribeMachine collects Machine for the current host and the git work tree around dir.
func DescribeMachine(dir string) Machine {
	m := Machine{
		CPUModel:   cpuModel(),
		Cores:      runtime.NumCPU(),
		Kernel:     kernel(),
		GoVersion:  goVersion(dir),
		Date:       time.Now().UTC().Truncate(time.Second),
		ClockTicks: ClockTicks(),
		GitCommit:  "unknown",
	}
	m.MemoryBytes = memTotal()
	if out, err := gitCmd(dir, "rev-parse", "HEAD"); err == nil {
		m.GitCommit = out
	}
	if out, err := gitCmd(dir, "status", "--porcelain"); err == nil {
		m.GitDirty = out != ""
	}
	return m
}

func gitCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// cpuModel is the first "model name" of /proc/cpuinfo (x86), else its "Hardware" or "CPU
// part" line (arm), else the architecture.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	var fallback string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			return strings.TrimSpace(v)
		case "Hardware", "CPU part":
			if fallback == "" {
				fallback = strings.TrimSpace(v)
			}
		}
	}
	if fallback != "" {
		return fallback
	}
	return runtime.GOARCH
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func kernel() string {
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "unknown"
}

// goVersion is the toolchain that builds the brokers (`go env GOVERSION` in the module),
// falling back to the one this binary was built with.
func goVersion(dir string) string {
	cmd := exec.Command("go", "env", "GOVERSION")
	cmd.Dir = dir
	if out, err := cmd.Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
		return strings.TrimSpace(string(out))
	}
	return runtime.Version()
}
