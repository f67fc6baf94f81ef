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
// (ProcStats), the clients, or something else. Sub of two snapshots is a window's use.
//
// The machine's times stay in integer clock ticks, field by field, until a share or a seconds
// figure is asked for: a window's busy and total time are sums of the same tick deltas, so a
// fully busy window has a busy share of exactly 1, and steal <= busy <= all hold exactly (float
// seconds taken per snapshot and then subtracted round differently and broke that).
type Usage struct {
	SelfSeconds float64 // user and system CPU of this process
	cpu         procStatCPU
	clkTck      uint64
}

// procStatCPU is the aggregate "cpu" line of /proc/stat in clock ticks: user nice system idle
// iowait irq softirq steal (guest time is inside user).
type procStatCPU [8]uint64

const (
	statIdle   = 3
	statIOWait = 4
	statSteal  = 7
)

// busy is every field but idle and iowait (steal included); all is every field.
func (c procStatCPU) busy() (n uint64) {
	for i, v := range c {
		if i != statIdle && i != statIOWait {
			n += v
		}
	}
	return n
}

func (c procStatCPU) all() (n uint64) {
	for _, v := range c {
		n += v
	}
	return n
}

// sub is the window from b to c, field by field. A field that went backwards counts 0: the
// kernel's iowait can decrease between two reads (see proc(5)), and the window must not
// borrow it from the others.
func (c procStatCPU) sub(b procStatCPU) (d procStatCPU) {
	for i := range c {
		if c[i] > b[i] {
			d[i] = c[i] - b[i]
		}
	}
	return d
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
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Usage{}, err
	}
	cpu, err := parseProcStatCPU(string(raw))
	if err != nil {
		return Usage{}, err
	}
	if clkTck <= 0 {
		return Usage{}, fmt.Errorf("clock ticks %d", clkTck)
	}
	return Usage{SelfSeconds: self, cpu: cpu, clkTck: uint64(clkTck)}, nil
}

// Sub is the use between snapshot b (earlier) and u.
func (u Usage) Sub(b Usage) Usage {
	return Usage{SelfSeconds: u.SelfSeconds - b.SelfSeconds, cpu: u.cpu.sub(b.cpu), clkTck: u.clkTck}
}

func (u Usage) seconds(ticks uint64) float64 {
	if u.clkTck == 0 {
		return 0
	}
	return float64(ticks) / float64(u.clkTck)
}

// BusySeconds is every CPU's time not idle and not waiting for I/O.
func (u Usage) BusySeconds() float64 { return u.seconds(u.cpu.busy()) }

// StealSeconds is the part of BusySeconds the hypervisor gave to others: a virtual machine's
// CPUs taken away, which slows every process of a run alike.
func (u Usage) StealSeconds() float64 { return u.seconds(u.cpu[statSteal]) }

// AllSeconds is every CPU's time.
func (u Usage) AllSeconds() float64 { return u.seconds(u.cpu.all()) }

// StealShare is the share of the machine's CPU time stolen by the hypervisor in a window.
func (u Usage) StealShare() float64 { return share(u.cpu[statSteal], u.cpu.all()) }

// BusyShare is the share of the machine's CPU time that was busy in a window (0 to 1).
func (u Usage) BusyShare() float64 { return share(u.cpu.busy(), u.cpu.all()) }

// share is part/whole, 0 for an empty whole; part <= whole gives at most exactly 1.
func share(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// parseProcStatCPU reads the aggregate "cpu" line of /proc/stat.
func parseProcStatCPU(s string) (procStatCPU, error) {
	var c procStatCPU
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return c, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("/proc/stat: %q: %v", line, err)
		}
		c[i] = n
	}
	return c, nil
}
