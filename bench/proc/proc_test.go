package proc

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a tiny broker for the server tests: `<test binary> helper-listen
// <port> [ignore-handler]` listens on the port and exits 0 on SIGTERM, or, with
// ignore-handler, leaves SIGTERM's default action (death by the signal).
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "helper-listen" {
		l, err := net.Listen("tcp", "127.0.0.1:"+os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(3)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		if len(os.Args) >= 4 && os.Args[3] == "ignore-handler" {
			select {}
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses; pgrp is field 5, utime 14, stime 15.
	stat := "4242 (inlet (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 12345 999 888"
	pgrp, ticks, err := parseStat(stat)
	if err != nil || pgrp != 4242 || ticks != 325 {
		t.Fatalf("parseStat = %d, %d, %v; want 4242, 325", pgrp, ticks, err)
	}
	for _, bad := range []string{"", "1 (x S 1 2", "1 (x) S 1 2 3"} {
		if _, _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestParseStatusHWM(t *testing.T) {
	status := "Name:\tinlet\nVmPeak:\t  900 kB\nVmHWM:\t   75776 kB\nVmRSS:\t 70000 kB\n"
	if got, err := parseStatusHWM(status); err != nil || got != 75776<<10 {
		t.Fatalf("parseStatusHWM = %d, %v", got, err)
	}
	if got, err := parseStatusHWM("Name:\tkthreadd\n"); err != nil || got != 0 {
		t.Errorf("no VmHWM line: %d, %v", got, err)
	}
	if _, err := parseStatusHWM("VmHWM:\t12 MB\n"); err == nil {
		t.Errorf("unit other than kB accepted")
	}
}

func TestParseIO(t *testing.T) {
	io := "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 399753216\ncancelled_write_bytes: 4096\n"
	w, c, err := parseIO(io)
	if err != nil || w != 399753216 || c != 4096 {
		t.Fatalf("parseIO = %d, %d, %v", w, c, err)
	}
	if _, _, err := parseIO("rchar: 1\n"); err == nil {
		t.Errorf("missing write_bytes accepted")
	}
}

// TestGroupStatsOfOwnGroup reads this test process's own group, which holds at least itself.
func TestGroupStatsOfOwnGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no /proc/self/io")
	}
	st, err := groupStats(syscall.Getpgrp(), ClockTicks())
	if err != nil {
		t.Fatal(err)
	}
	if st.Processes < 1 || st.PeakRSSBytes <= 0 || st.CPUSeconds < 0 {
		t.Errorf("implausible stats %+v", st)
	}
}

// TestResetPeakRSS: after a reset the peak is the resident set since then, not the 128 MiB
// touched and given back before it.
func TestResetPeakRSS(t *testing.T) {
	hwm := func() int64 {
		raw, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Skip("no /proc/self/status")
		}
		n, err := parseStatusHWM(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	b := make([]byte, 128<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	before := hwm()
	b = nil
	debug.FreeOSMemory()
	if err := resetPeakRSS(syscall.Getpgrp()); err != nil {
		t.Fatal(err)
	}
	if after := hwm(); after > before-64<<20 {
		t.Errorf("peak RSS %d after the reset, %d before it: want at least 64 MiB less", after, before)
	}
}

func helperTarget(extra ...string) Target {
	return Target{Name: "helper", Argv: append([]string{os.Args[0], "helper-listen", "{port}"}, extra...)}
}

// TestServerStartKillRestartStop: a server accepts on its port, survives SIGKILL and restart on
// the same port, and stops cleanly with SIGTERM.
func TestServerStartKillRestartStop(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(helperTarget(), dir, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	port := s.port
	st, err := s.Stats(ClockTicks())
	if err != nil || st.Processes != 1 || st.PeakRSSBytes <= 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("running after kill")
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	if s.port != port {
		t.Fatalf("restart moved from port %d to %d", port, s.port)
	}
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		t.Fatalf("restarted server does not accept: %v", err)
	}
	c.Close()
	es, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if es.Status != "exit status 0" {
		t.Errorf("exit %+v", es)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	if strings.Count(string(log), "===== bench: start") != 2 {
		t.Errorf("log does not show two starts:\n%s", log)
	}
}

// TestServerStopAcceptsDeathBySIGTERM: a process without a SIGTERM handler (or a shell
// wrapper) dies of the signal; that is a clean stop.
func TestServerStopAcceptsDeathBySIGTERM(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(helperTarget("ignore-handler"), dir, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.Stop()
	if err != nil {
		t.Fatalf("stop: %v (%+v)", err, es)
	}
	if !strings.Contains(es.Status, "terminated") {
		t.Errorf("status %q, want death by SIGTERM", es.Status)
	}
}

func TestTargetArgvSubstitutes(t *testing.T) {
	tg := Target{Argv: []string{"/bin/sh", "-c", "x --port {port} --dir {dir} --again {port}"}}
	got := strings.Join(tg.Expand(9092, "/d"), " ")
	if got != "/bin/sh -c x --port 9092 --dir /d --again 9092" {
		t.Errorf("argv = %q", got)
	}
}

func TestParseProcStatCPU(t *testing.T) {
	c, err := parseProcStatCPU("cpu  100 5 40 800 30 2 3 20 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil || c.busy() != 100+5+40+2+3+20 || c[statSteal] != 20 || c.all() != 1000 {
		t.Fatalf("cpu %v busy %d all %d err %v", c, c.busy(), c.all(), err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 x 5 6 7 8\n", "cpu 1 2 3\n"} {
		if _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// checkWindow asserts what every window must hold exactly: 0 <= steal <= busy <= all, shares
// within [0, 1], and seconds in the same order as the shares.
func checkWindow(t *testing.T, name string, d Usage) {
	t.Helper()
	if d.StealShare() < 0 || d.StealShare() > d.BusyShare() || d.BusyShare() > 1 {
		t.Errorf("%s: steal share %v, busy share %v (%+v)", name, d.StealShare(), d.BusyShare(), d)
	}
	if d.StealSeconds() < 0 || d.StealSeconds() > d.BusySeconds() || d.BusySeconds() > d.AllSeconds() {
		t.Errorf("%s: steal %vs, busy %vs, all %vs", name, d.StealSeconds(), d.BusySeconds(), d.AllSeconds())
	}
}

// TestUsageWindowFullyBusyIsExactlyOne guards the failure seen on a fresh clone with both cores
// busy: busy and all ticks equal, yet a share of 1.0000000000076 from seconds rounded apart.
func TestUsageWindowFullyBusyIsExactlyOne(t *testing.T) {
	sample := func(line string) Usage {
		c, err := parseProcStatCPU(line)
		if err != nil {
			t.Fatal(err)
		}
		return Usage{cpu: c, clkTck: 100}
	}
	cases := []struct {
		name          string
		before, after string
		busy, steal   float64
	}{
		// Large counters (a machine up for weeks) and a window with no idle or iowait tick.
		{"fully busy", "cpu 4999999950000170 3 1234567 77777777 4444 5 6 7\n", "cpu 4999999950000182 3 1234567 77777777 4444 5 6 7\n", 1, 0},
		{"fully busy with steal", "cpu 100 0 100 100 0 0 0 100\n", "cpu 110 0 105 100 0 0 0 105\n", 1, 0.25},
		{"half idle", "cpu 100 0 0 100 0 0 0 0\n", "cpu 150 0 0 150 0 0 0 0\n", 0.5, 0},
		// iowait can go backwards between reads (proc(5)); the window must not count it.
		{"iowait decreases", "cpu 100 0 0 100 50 0 0 0\n", "cpu 110 0 0 100 40 0 0 0\n", 1, 0},
		{"empty", "cpu 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7 8\n", 0, 0},
	}
	for _, tc := range cases {
		d := sample(tc.after).Sub(sample(tc.before))
		checkWindow(t, tc.name, d)
		if d.BusyShare() != tc.busy || d.StealShare() != tc.steal {
			t.Errorf("%s: busy share %v steal share %v, want %v %v", tc.name, d.BusyShare(), d.StealShare(), tc.busy, tc.steal)
		}
	}
}

// TestReadUsageLive reads the machine twice around some CPU of this process; whatever else the
// machine runs meanwhile, the window's invariants hold.
func TestReadUsageLive(t *testing.T) {
	u0, err := ReadUsage(ClockTicks())
	if err != nil {
		t.Fatal(err)
	}
	var sink uint64
	for x := 0; x < 1e8; x++ { // some CPU of this process
		sink += uint64(x)
	}
	u1, err := ReadUsage(ClockTicks())
	if err != nil {
		t.Fatal(err)
	}
	d := u1.Sub(u0)
	if d.SelfSeconds <= 0 {
		t.Errorf("self %vs after a busy loop (%d)", d.SelfSeconds, sink)
	}
	checkWindow(t, "live", d)
}
