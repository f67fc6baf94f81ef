package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// ProcStats is what the kernel says a server's processes used. It is read from /proc just
// before the server is stopped, so the shutdown (Pebble's close, a final flush) is not in it;
// ExitStats has the shutdown included for the leader process.
type ProcStats struct {
	// CPUSeconds is utime+stime of every process in the server's process group, in clock ticks
	// (/proc/PID/stat fields 14 and 15) divided by CLK_TCK. Threads are included; children
	// that already exited are not.
	CPUSeconds float64 `json:"cpu_seconds"`
	// PeakRSSBytes is VmHWM (/proc/PID/status), the resident set's high-water mark, summed over
	// the group's processes.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// WriteBytes is write_bytes of /proc/PID/io: bytes the processes caused to be sent to the
	// block layer, counted when a page is dirtied (so data still in the page cache counts).
	// CancelledWriteBytes is the part of it that was truncated or deleted before writeback.
	WriteBytes          int64 `json:"write_bytes"`
	CancelledWriteBytes int64 `json:"cancelled_write_bytes"`
	// Processes is how many processes the group had.
	Processes int `json:"processes"`
}

// ExitStats is the leader process's rusage from wait4, shutdown included.
type ExitStats struct {
	Status     string  `json:"status"` // "exit status 0", "signal: killed"
	CPUSeconds float64 `json:"cpu_seconds"`
	MaxRSS     int64   `json:"max_rss_bytes"`
	// StopSeconds is how long the process took to exit after SIGTERM.
	StopSeconds float64 `json:"stop_seconds"`
}

// ClockTicks returns the kernel's USER_HZ from `getconf CLK_TCK`, 100 if getconf fails (the
// value on every Linux architecture Go supports).
func ClockTicks() int {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return n
		}
	}
	return 100
}

// parseStat returns the process group and utime+stime (clock ticks) from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may itself contain spaces
// and parentheses, so fields are counted from the last ')'.
func parseStat(stat string) (pgrp int, ticks uint64, err error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("stat: no ')' after the command name")
	}
	// After ')': field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(stat[i+1:])
	if len(rest) < 13 {
		return 0, 0, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(rest))
	}
	if pgrp, err = strconv.Atoi(rest[5-3]); err != nil {
		return 0, 0, fmt.Errorf("stat: pgrp: %w", err)
	}
	utime, err := strconv.ParseUint(rest[14-3], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat: utime: %w", err)
	}
	stime, err := strconv.ParseUint(rest[15-3], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat: stime: %w", err)
	}
	return pgrp, utime + stime, nil
}

// parseStatusHWM returns VmHWM in bytes from the text of /proc/PID/status (0 when the line is
// missing, as for kernel threads).
func parseStatusHWM(status string) (int64, error) {
	for line := range strings.Lines(status) {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("status: unexpected VmHWM line %q", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status: VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, nil
}

// parseIO returns write_bytes and cancelled_write_bytes from the text of /proc/PID/io.
func parseIO(io string) (write, cancelled int64, err error) {
	found := 0
	for line := range strings.Lines(io) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "write_bytes":
			dst = &write
		case "cancelled_write_bytes":
			dst = &cancelled
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("io: %s: %w", name, err)
		}
		*dst = n
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("io: write_bytes or cancelled_write_bytes missing")
	}
	return write, cancelled, nil
}

// groupProc is a live process of a group, with its CPU ticks (utime + stime) when listed.
type groupProc struct {
	pid   int
	ticks uint64
}

// groupProcs lists the live processes of process group pgid, reading each one's stat once.
func groupProcs(pgid int) ([]groupProc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var procs []groupProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone since ReadDir
		}
		if pgrp, t, err := parseStat(string(raw)); err == nil && pgrp == pgid {
			procs = append(procs, groupProc{pid, t})
		}
	}
	return procs, nil
}

// resetPeakRSS sets the peak RSS (VmHWM) of every live process of group pgid back to its
// present RSS (clear_refs 5), so a later groupStats gives the peak since then.
func resetPeakRSS(pgid int) error {
	procs, err := groupProcs(pgid)
	if err != nil {
		return err
	}
	for _, p := range procs {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.pid), []byte("5"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// groupStats sums ProcStats over the live processes of process group pgid. A server is
// started as the leader of its own group, so a peer run through `sh -c` is measured together
// with the broker the shell started.
func groupStats(pgid, clkTck int) (ProcStats, error) {
	procs, err := groupProcs(pgid)
	if err != nil {
		return ProcStats{}, err
	}
	var st ProcStats
	var ticks uint64
	for _, p := range procs {
		pid, t := p.pid, p.ticks
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return ProcStats{}, err
		}
		hwm, err := parseStatusHWM(string(status))
		if err != nil {
			return ProcStats{}, fmt.Errorf("pid %d: %w", pid, err)
		}
		rawIO, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			return ProcStats{}, err
		}
		w, c, err := parseIO(string(rawIO))
		if err != nil {
			return ProcStats{}, fmt.Errorf("pid %d: %w", pid, err)
		}
		ticks += t
		st.PeakRSSBytes += hwm
		st.WriteBytes += w
		st.CancelledWriteBytes += c
		st.Processes++
	}
	if st.Processes == 0 {
		return ProcStats{}, fmt.Errorf("no live process in group %d", pgid)
	}
	st.CPUSeconds = float64(ticks) / float64(clkTck)
	return st, nil
}

// exitStats reads the leader's rusage after wait.
func exitStats(ps *os.ProcessState) ExitStats {
	es := ExitStats{Status: ps.String()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		es.CPUSeconds = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
		es.MaxRSS = ru.Maxrss << 10 // kilobytes on Linux
	}
	return es
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// FSType names the file system dir is on: a data directory on tmpfs makes fsync free and
// write_bytes zero, which no result should hide.
func FSType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch uint64(st.Type) {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794C7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	case 0xF2F52010:
		return "f2fs"
	}
	return fmt.Sprintf("0x%x", uint64(st.Type))
}
