// Package proc starts, measures and stops the brokers the benchmarks drive, and describes the
// machine they run on.
//
// Each broker (Target: a name and a command line with {port}, {dir} and {partitions}) runs as
// Server: the leader of its own process group on a free loopback port and a data directory
// that restarts keep (server.go). Start waits until it accepts; Stats reads the group's CPU
// time, peak RSS and disk writes from /proc (proc.go) just before Stop sends SIGTERM and waits,
// killing the group after a timeout; Kill is SIGKILL and Restart starts it again on the same
// port, for the chaos run. DescribeMachine (machine.go) records the host and the git work tree
// for a result file. A Server is used by one goroutine at a time; nothing here locks.
//
// Files: server.go (Target, Server), proc.go (the /proc readers, ProcStats and ExitStats),
// machine.go (Machine).
package proc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds one start: process start plus recovery of a data directory a kill
	// left behind (Pebble WAL replay, segment tail replay).
	readyTimeout = 30 * time.Second
	// startAttempts bounds retries when a start dies before it accepts: another process took
	// the free port we picked, or a restart's port is not bindable yet.
	startAttempts = 6
	// stopTimeout bounds the drain after SIGTERM before the group is killed.
	stopTimeout = 60 * time.Second
)

// Target is a broker to measure: a name and the command that starts it. Every argument has
// {port} and {dir} replaced by the port to listen on (loopback) and a fresh data directory,
// and {partitions} by the partition count of the load (WithPartitions, when a run is measured:
// a broker's default partition count that follows the load, as bench scale needs).
//
// TopicConfigs, when not empty, are the configs the harness creates the run's topics with
// (CreateTopics) before its clients first produce to them, remote.storage.enable for one.
type Target struct {
	Name         string            `json:"name"`
	Argv         []string          `json:"argv"`
	TopicConfigs map[string]string `json:"topic_configs,omitempty"`
}

// Expand is the command line with {port} and {dir} replaced.
func (t Target) Expand(port int, dir string) []string {
	r := strings.NewReplacer("{port}", strconv.Itoa(port), "{dir}", dir)
	out := make([]string, len(t.Argv))
	for i, a := range t.Argv {
		out[i] = r.Replace(a)
	}
	return out
}

// WithPartitions returns t with {partitions} replaced by n in every argument.
func (t Target) WithPartitions(n int) Target {
	if !slices.ContainsFunc(t.Argv, func(a string) bool { return strings.Contains(a, "{partitions}") }) {
		return t
	}
	out := Target{Name: t.Name, Argv: make([]string, len(t.Argv)), TopicConfigs: t.TopicConfigs}
	for i, a := range t.Argv {
		out.Argv[i] = strings.ReplaceAll(a, "{partitions}", strconv.Itoa(n))
	}
	return out
}

// Server is one broker process on a data directory and a loopback port that both stay the
// same across restarts. It runs as the leader of its own process group, so a shell wrapper
// and the broker it starts are measured, signalled and killed together.
type Server struct {
	target  Target
	dir     string
	port    int
	logPath string
	starts  int

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	state  *os.ProcessState
}

// Start starts t on dir and a free loopback port and waits until it accepts TCP
// connections. Its stdout and stderr are appended to logPath.
func Start(t Target, dir, logPath string) (*Server, error) {
	s := &Server{target: t, dir: dir, logPath: logPath}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the loopback host:port the broker listens on.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the port the broker listens on.
func (s *Server) Port() int { return s.port }

// Pid is the process id of the group's leader.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// State is how the leader last exited; nil while it runs or before it first exits.
func (s *Server) State() *os.ProcessState { return s.state }

// Restart starts the command again on the same data directory and port, after a Kill or an
// exit.
func (s *Server) Restart() error { return s.start() }

// Running reports whether the leader has been started and has not exited.
func (s *Server) Running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start runs the command (picking a free port the first time) and waits until it accepts. A
// start that dies first is retried: on a new port the first time, on the same port after a
// pause on a restart, since clients must find the broker where they left it.
func (s *Server) start() error {
	if s.Running() {
		return fmt.Errorf("%s: start while pid %d is still running", s.target.Name, s.Pid())
	}
	first := s.port == 0
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if first {
			p, err := freePort()
			if err != nil {
				return err
			}
			s.port = p
		}
		if lastErr = s.tryStart(); lastErr == nil {
			return nil
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
	return fmt.Errorf("%s: no start in %d attempts: %w (log %s:\n%s)", s.target.Name, startAttempts, lastErr, s.logPath, LogTail(s.logPath, 20))
}

func (s *Server) tryStart() error {
	s.starts++
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := s.target.Expand(s.port, s.dir)
	fmt.Fprintf(logf, "===== bench: start %d of %s at %s: %q =====\n", s.starts, s.target.Name, time.Now().Format(time.RFC3339Nano), argv)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	logf.Close() // the child holds its own descriptor
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.state = cmd, exited, nil
	go func() {
		_ = cmd.Wait()
		s.state = cmd.ProcessState
		close(exited)
	}()
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("exited before accepting on %s: %v", s.Addr(), s.state)
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.killGroup()
	<-exited
	return fmt.Errorf("not accepting on %s within %v", s.Addr(), readyTimeout)
}

// Stats reads the group's CPU, peak RSS and disk writes from /proc.
func (s *Server) Stats(clkTck int) (ProcStats, error) {
	if !s.Running() {
		return ProcStats{}, fmt.Errorf("%s is not running (%v)", s.target.Name, s.state)
	}
	return groupStats(s.Pid(), clkTck)
}

// ResetPeakRSS makes the next Stats' PeakRSSBytes the peak since now (the phase that follows).
func (s *Server) ResetPeakRSS() error {
	if !s.Running() {
		return fmt.Errorf("%s is not running (%v)", s.target.Name, s.state)
	}
	return resetPeakRSS(s.Pid())
}

// Stop sends SIGTERM to the group and waits for the leader to exit, killing the group after
// stopTimeout. Whatever of the group is left after the leader exits is killed.
func (s *Server) Stop() (ExitStats, error) {
	if !s.Running() {
		if s.state == nil {
			return ExitStats{}, errors.New("never started")
		}
		return exitStats(s.state), fmt.Errorf("%s had already exited: %v", s.target.Name, s.state)
	}
	began := time.Now()
	pgid := s.Pid()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.After(stopTimeout)
	var err error
	select {
	case <-s.exited:
	case <-deadline:
		err = fmt.Errorf("%s still running %v after SIGTERM; killed", s.target.Name, stopTimeout)
		s.killGroup()
		<-s.exited
	}
	// A wrapper shell may exit before the broker it started has finished draining: wait for
	// the whole group (signal 0 fails with ESRCH once no process is left in it).
	for err == nil && syscall.Kill(-pgid, 0) == nil {
		select {
		case <-deadline:
			err = fmt.Errorf("%s: processes of group %d still running %v after SIGTERM; killed", s.target.Name, pgid, stopTimeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopped := time.Since(began)
	s.killGroup()
	es := exitStats(s.state)
	es.StopSeconds = stopped.Seconds()
	if err == nil && !cleanStop(s.state) {
		err = fmt.Errorf("%s exited after SIGTERM with %v", s.target.Name, s.state)
	}
	return es, err
}

// cleanStop reports whether a process stopped by SIGTERM ended well: exit status 0, or death
// by the SIGTERM itself (the default action, which is how a shell wrapper or a broker without
// a handler stops).
func cleanStop(ps *os.ProcessState) bool {
	if ps.Success() {
		return true
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}

// Kill sends SIGKILL to the group and waits for the leader to be gone.
func (s *Server) Kill() error {
	if !s.Running() {
		return fmt.Errorf("%s: kill without a running process (%v)", s.target.Name, s.state)
	}
	s.killGroup()
	select {
	case <-s.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s: pid %d still running 10s after SIGKILL", s.target.Name, s.Pid())
	}
}

func (s *Server) killGroup() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// freePort asks the kernel for a free loopback port. Another process may take it before the
// server binds it; start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// LogTail returns the last lines of a log file.
func LogTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
