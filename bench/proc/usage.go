package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Usage is a snapshot of the CPU time of the calling process (bench itself: its consumers and
// producers) and of the whole machine, so that a phase can say who had the CPUs: the broker
// (ProcStats), the clients, or something else. Two snapshots' difference is a window's use.
type Usage struct {
	SelfSeconds float64 // user and system CPU of this process
	BusySeconds float64 // every CPU's time not idle and not waiting for I/O (/proc/stat)
	// StealSeconds is the part of BusySeconds the hypervisor gave to others: a virtual
	// machine's CPUs taken away, which slows every process of a run alike.
	StealSeconds float64
	AllSeconds   float64 // every CPU's time
}

// SelfCPUSeconds is the user and system CPU time of the calling process so far.
func SelfCPUSeconds() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return tvSeconds(ru.Utime) + tvSeconds(ru.Stime), nil
}

// ReadUsage takes a Usage now; clkTck is the unit of /proc/stat (Machine.ClockTicks).
func ReadUsage(clkTck int) (Usage, error) {
	self, err := SelfCPUSeconds()
	if err != nil {
		return Usage{}, err
	}
	u := Usage{SelfSeconds: self}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Usage{}, err
	}
	busy, steal, all, err := parseProcStatCPU(string(raw))
	if err != nil {
		return Usage{}, err
	}
	tick := float64(clkTck)
	u.BusySeconds, u.StealSeconds, u.AllSeconds = float64(busy)/tick, float64(steal)/tick, float64(all)/tick
	return u, nil
}

// Sub is the use between snapshot b (earlier) and u.
func (u Usage) Sub(b Usage) Usage {
	return Usage{SelfSeconds: u.SelfSeconds - b.SelfSeconds, BusySeconds: u.BusySeconds - b.BusySeconds,
		StealSeconds: u.StealSeconds - b.StealSeconds, AllSeconds: u.AllSeconds - b.AllSeconds}
}

// StealShare is the share of the machine's CPU time stolen by the hypervisor in a window.
func (u Usage) StealShare() float64 {
	if u.AllSeconds <= 0 {
		return 0
	}
	return u.StealSeconds / u.AllSeconds
}

// BusyShare is the share of the machine's CPU time that was busy in a window (0 to 1).
func (u Usage) BusyShare() float64 {
	if u.AllSeconds <= 0 {
		return 0
	}
	return u.BusySeconds / u.AllSeconds
}

// parseProcStatCPU reads the aggregate "cpu" line of /proc/stat: user nice system idle iowait
// irq softirq steal (guest time is inside user). busy leaves out idle and iowait; steal is
// counted in busy too.
func parseProcStatCPU(s string) (busy, steal, all uint64, err error) {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/stat: %q: %v", line, err)
		}
		all += n
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			steal = n
			busy += n
		default:
			busy += n
		}
	}
	return busy, steal, all, nil
}
