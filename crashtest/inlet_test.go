package crashtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// inletBin is the binary TestMain builds; every test runs it as a subprocess.
var inletBin string

// layouts are the durable storage layouts (--storage) the crash tests run on, with the flags
// that select each. Segments are kept small so that a run spans a dozen segment files and a
// kill can land on a segment roll; the default (256 MiB) would hold a whole run in one file.
var layouts = []struct {
	name string
	args []string
}{
	{"segments", []string{"--storage", "segments", "--segment-bytes", "8MiB"}},
	{"pebble", []string{"--storage", "pebble"}},
}

// forEachLayout runs f as a subtest per storage layout.
func forEachLayout(t *testing.T, f func(t *testing.T, args []string)) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { f(t, l.args) })
	}
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "inlet-crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.Exit(1)
	}
	inletBin = filepath.Join(dir, "inlet")
	args := []string{"build", "-o", inletBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "inlet/cmd/inlet")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest: go build inlet/cmd/inlet:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	// readyTimeout bounds one start: Pebble recovery of a few hundred MB of WAL on a slow disk
	// plus process start.
	readyTimeout = 20 * time.Second
	// startAttempts bounds retries when the port cannot be bound (another process took the
	// free port we picked, or the old listener's port is not reusable yet).
	startAttempts = 8
)

// inlet is one node under test: a data directory and a port that stay the same across
// restarts, and the process currently running on them (if any).
type inlet struct {
	t       *testing.T
	dir     string
	port    int
	args    []string // flags beyond --listen, --data-dir and --default-partitions
	logPath string   // server stderr of every start, appended; printed on failure
	nofile  int      // when set, the node's RLIMIT_NOFILE, soft and hard (descriptors_test.go)
	starts  int

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	state  *os.ProcessState
}

// startInlet starts a node on a fresh data directory and a free port, with extra flags added
// to the standard ones on every start. The process is killed when the test ends, and the tail
// of its log is printed if the test failed.
func startInlet(t *testing.T, args ...string) *inlet {
	t.Helper()
	n := &inlet{t: t, dir: filepath.Join(t.TempDir(), "data"), args: args}
	n.logPath = filepath.Join(t.TempDir(), "inlet.log")
	t.Cleanup(func() {
		if n.running() {
			n.kill()
		}
		if r := n.firstRace(); r != "" {
			t.Errorf("the race detector reported a data race in the node:\n%s", r)
		}
		if t.Failed() {
			t.Logf("inlet log tail (%s):\n%s", n.logPath, n.logTail(60))
		}
	})
	n.start()
	return n
}

func (n *inlet) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

func (n *inlet) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// start runs the binary on n's directory and port (picking a free port the first time) and
// waits until it accepts connections. A start whose process dies before it is ready (the port
// was taken) is retried: with a new port on the first start, on the same port after a pause
// on a restart (clients must find the node where they left it).
func (n *inlet) start() {
	t := n.t
	t.Helper()
	if n.running() {
		t.Fatalf("inlet: start while pid %d is still running", n.cmd.Process.Pid)
	}
	first := n.port == 0
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if first {
			n.port = freePort(t)
		}
		err := n.tryStart()
		if err == nil {
			return
		}
		lastErr = err
		t.Logf("inlet: start attempt %d on port %d failed: %v", attempt, n.port, err)
		time.Sleep(time.Duration(attempt) * 250 * time.Millisecond)
	}
	t.Fatalf("inlet: could not start after %d attempts: %v\nlog tail:\n%s", startAttempts, lastErr, n.logTail(40))
}

func (n *inlet) tryStart() error {
	if err := n.launch(); err != nil {
		return err
	}
	return n.waitReady(readyTimeout)
}

// launch starts the binary on n's directory and port without waiting for it to listen (a
// --standby node listens only once it has taken its bucket prefix).
func (n *inlet) launch() error {
	n.starts++
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "===== crashtest: start %d on port %d at %s, flags %q =====\n", n.starts, n.port, time.Now().Format(time.RFC3339Nano), n.args)
	args := append([]string{
		"--listen", n.addr(),
		"--data-dir", n.dir,
		"--default-partitions", "16",
		"--group-initial-rebalance-delay-ms", "0", // Kafka's 3 s only slows the group tests
	}, n.args...)
	cmd := exec.Command(inletBin, args...)
	if n.nofile > 0 {
		cmd = exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, n.nofile), inletBin}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	// The child holds its own copy of the descriptor.
	logf.Close()
	exited := make(chan struct{})
	n.cmd, n.exited, n.state = cmd, exited, nil
	go func() {
		_ = cmd.Wait()
		n.state = cmd.ProcessState
		close(exited)
	}()
	return nil
}

// waitReady waits up to timeout for the running process to accept connections on its port
// and log its listener; the process is killed if it does not.
func (n *inlet) waitReady(timeout time.Duration) error {
	cmd, exited := n.cmd, n.exited
	began := time.Now()
	for time.Since(began) < timeout {
		select {
		case <-exited:
			return fmt.Errorf("exited before ready: %v", n.state)
		default:
		}
		c, err := net.DialTimeout("tcp", n.addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			// A listener on the port could be someone else's if ours failed to bind and has
			// not exited yet: the node logs "listening" only once its own listener is bound.
			if n.listeningLogged() {
				n.t.Logf("inlet: start %d (pid %d) ready on %s in %v", n.starts, cmd.Process.Pid, n.addr(), time.Since(began).Round(time.Millisecond))
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.kill()
	return fmt.Errorf("not ready within %v", timeout)
}

// listeningLogged reports whether the current start has logged its bound listener.
func (n *inlet) listeningLogged() bool { return n.logged("msg=listening") }

// logged reports whether the current start's log contains s.
func (n *inlet) logged(s string) bool {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return false
	}
	marker := fmt.Sprintf("===== crashtest: start %d ", n.starts)
	i := bytes.LastIndex(b, []byte(marker))
	return i >= 0 && bytes.Contains(b[i:], []byte(s))
}

// logSize is the size of the log so far, a point for loggedSince.
func (n *inlet) logSize() int64 {
	st, err := os.Stat(n.logPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// loggedSince reports whether the current start's log, past its first from bytes (logSize),
// contains s: what a process logged after a point, such as a node that re-executed itself
// (its log goes on under the same start).
func (n *inlet) loggedSince(from int64, s string) bool {
	b, err := os.ReadFile(n.logPath)
	if err != nil || int64(len(b)) < from {
		return false
	}
	marker := fmt.Sprintf("===== crashtest: start %d ", n.starts)
	i := bytes.LastIndex(b, []byte(marker))
	return i >= 0 && bytes.Contains(b[max(i, int(from)):], []byte(s))
}

// loggedAny reports whether any start's log contains s.
func (n *inlet) loggedAny(s string) bool {
	b, err := os.ReadFile(n.logPath)
	return err == nil && bytes.Contains(b, []byte(s))
}

// firstRace returns the node's first race detector report, or "".
func (n *inlet) firstRace() string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return ""
	}
	i := bytes.Index(b, []byte("WARNING: DATA RACE"))
	if i < 0 {
		return ""
	}
	r := b[i:]
	if j := bytes.Index(r, []byte("\n==================")); j >= 0 {
		r = r[:j]
	}
	return string(r)
}

// waitLogged waits until the current start's log contains s.
func (n *inlet) waitLogged(s string, timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for !n.logged(s) {
		if time.Now().After(deadline) {
			n.t.Fatalf("inlet: %q not logged within %v", s, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL to the running process and waits for it to be gone.
func (n *inlet) kill() {
	n.t.Helper()
	if !n.running() {
		n.t.Fatalf("inlet: kill without a running process")
	}
	pid := n.cmd.Process.Pid
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		n.t.Fatalf("inlet: kill pid %d: %v", pid, err)
	}
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		n.t.Fatalf("inlet: pid %d still running 10s after SIGKILL", pid)
	}
	n.t.Logf("inlet: killed pid %d (SIGKILL): %v", pid, n.state)
}

// terminate sends SIGTERM and waits up to timeout for the process to exit, returning its
// exit state, or nil if it did not exit in time (it is still running then).
func (n *inlet) terminate(timeout time.Duration) (*os.ProcessState, time.Duration) {
	n.t.Helper()
	began := time.Now()
	n.sigterm()
	return n.waitExit(timeout), time.Since(began)
}

// sigterm sends SIGTERM to the running process.
func (n *inlet) sigterm() {
	n.t.Helper()
	if !n.running() {
		n.t.Fatalf("inlet: SIGTERM without a running process")
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		n.t.Fatalf("inlet: SIGTERM pid %d: %v", n.cmd.Process.Pid, err)
	}
}

// waitExit waits up to timeout for the process to exit and returns its state, or nil if it is
// still running.
func (n *inlet) waitExit(timeout time.Duration) *os.ProcessState {
	select {
	case <-n.exited:
		return n.state
	case <-time.After(timeout):
		return nil
	}
}

// restart kills nothing: it starts a new process on the same directory and port after the
// previous one has exited.
func (n *inlet) restart() {
	n.t.Helper()
	n.start()
}

// logTail returns the last lines of the server's log.
func (n *inlet) logTail(lines int) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// handedOut is every port freePort has returned in this test process: the kernel may hand a
// port it just gave (and that was closed again) out once more, and a test that picks a node's
// registry port and then its Kafka port must not get the same one twice.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// freePort asks the kernel for a free loopback port that this process has not handed out
// before. Another process may take it before the node binds it; start retries then.
func freePort(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
	t.Fatal("free port: the kernel handed out only ports already used")
	return 0
}
