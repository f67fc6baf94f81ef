package crashtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hostile clients against the real binary: what one node holds in memory and how many
// connections it keeps open is bounded by its settings, whatever clients send. Memory is the
// process's peak resident set (VmHWM), read from /proc.

// peakRSS is the node's peak resident set size in bytes.
func (n *inlet) peakRSS() int64 {
	n.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		n.t.Fatalf("read /proc status: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	n.t.Fatal("no VmHWM in /proc status")
	return 0
}

// slowloris opens conns connections to addr; each declares a frame of declared bytes and then
// sends send bytes of zeros (as fast as the node takes them) and never more. It returns once
// every connection has sent its bytes or been closed by the node, and reports how many were
// closed by the node.
func slowloris(t *testing.T, addr string, conns, declared, send int) (closedByNode int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	zeros := make([]byte, 1<<20)
	for i := 0; i < conns; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		held = append(held, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			// A header that is valid as far as it goes: size, api key 0, version 9.
			hdr := binary.BigEndian.AppendUint32(nil, uint32(declared))
			hdr = append(hdr, 0, 0, 0, 9, 0, 0, 0, 1)
			_, err := c.Write(hdr)
			for sent := 8; err == nil && sent < send; {
				k := min(len(zeros), send-sent)
				k, err = c.Write(zeros[:k])
				sent += k
			}
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				mu.Lock()
				closedByNode++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	return closedByNode
}

// TestSlowlorisBeforeAuthenticationIsBounded: twelve connections to a SASL listener each
// declare a 100 MiB frame and send 90 MiB of zeros without authenticating. Before
// authentication frames are capped at sasl.server.max.receive.size (512 KiB), so every one is
// closed at its length prefix and the node's memory stays within the in-flight budget plus
// 64 MiB (it used to allocate each declared frame whole: 1.1 GiB).
func TestSlowlorisBeforeAuthenticationIsBounded(t *testing.T) {
	saslPort := freePort(t)
	path := filepath.Join(t.TempDir(), "inlet.yaml")
	usersConfig(t, path, saslPort, "alice")
	n := startInlet(t, "--config", path, "--max-request-bytes", "100MiB")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(saslPort))
	closed := slowloris(t, addr, 12, 100<<20, 90<<20)
	if closed != 12 {
		t.Errorf("%d of 12 connections were closed by the node; want all (frames over 512 KiB before authentication)", closed)
	}
	const budget = 256 << 20 // the default --inflight-budget
	rss := n.peakRSS()
	t.Logf("peak RSS %d MiB", rss>>20)
	if rss > budget+64<<20 {
		t.Errorf("peak RSS %d MiB, want under the budget plus 64 MiB (%d MiB)", rss>>20, (budget+64<<20)>>20)
	}
	if !n.logged("refused: request larger than sasl.server.max.receive.size before authentication") {
		t.Error("the refusal is not logged")
	}
	dialRaw(t, n.addr()).apiVersions()
}

// TestSlowlorisWithoutAuthenticationIsBounded is the same on a listener that needs no
// credentials, where frames may be as large as --max-request-bytes: a frame's buffer grows as
// its bytes arrive and holds in-flight budget for what it holds, so once frames in transit
// fill the budget the node refuses (closes) the connections that want more, except the oldest.
// What the frames hold stays within the budget plus that one frame; the Go heap may grow to
// twice what is live between collections (GOGC=100), so the node runs as an operator who
// wants a bound runs it, with GOMEMLIMIT (here the budget plus the frame plus 16 MiB), and
// its memory stays within the budget, plus that one frame, plus 64 MiB.
func TestSlowlorisWithoutAuthenticationIsBounded(t *testing.T) {
	const budget, maxRequest = 64 << 20, 16 << 20
	t.Setenv("GOMEMLIMIT", strconv.Itoa(budget+maxRequest+16<<20))
	n := startInlet(t, "--inflight-budget", "64MiB", "--max-request-bytes", "16MiB")
	closed := slowloris(t, n.addr(), 12, maxRequest, maxRequest-1<<20)
	if closed == 0 {
		t.Error("no connection was refused, with 12 x 15 MiB in transit and a 64 MiB budget")
	}
	rss := n.peakRSS()
	t.Logf("peak RSS %d MiB, %d of 12 connections refused", rss>>20, closed)
	if rss > budget+maxRequest+64<<20 {
		t.Errorf("peak RSS %d MiB, want under the budget plus one frame plus 64 MiB (%d MiB)", rss>>20, (budget+maxRequest+64<<20)>>20)
	}
	if !n.logged("refused: in-flight budget exhausted by requests still arriving") {
		t.Error("the refusal is not logged")
	}
	dialRaw(t, n.addr()).apiVersions()
}

// TestIdleConnectionsAreClosedAndLimited: 1,000 connections that say nothing cost little
// memory and are closed after connections.max.idle.ms; max.connections and
// max.connections.per.ip refuse the connection after the limit.
func TestIdleConnectionsAreClosedAndLimited(t *testing.T) {
	n := startInlet(t, "--connections-max-idle-ms", "2000", "--max-connections", "1000")
	var conns []net.Conn
	var dialed []time.Time // when each dial began: its idle time cannot start before
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 1000; i++ {
		dialed = append(dialed, time.Now())
		c, err := net.DialTimeout("tcp", n.addr(), 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	// One more is over max.connections: closed at once, without an answer.
	extra, err := net.DialTimeout("tcp", n.addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expectEOF(t, extra, 3*time.Second, "the 1,001st connection (max.connections 1000)")
	if !n.logged("refused: max.connections reached") {
		t.Error("the max.connections refusal is not logged")
	}
	const budget = 256 << 20
	rss := n.peakRSS()
	t.Logf("peak RSS %d MiB with 1,000 idle connections", rss>>20)
	if rss > budget+64<<20 {
		t.Errorf("peak RSS %d MiB with 1,000 idle connections", rss>>20)
	}
	// Every idle connection is closed after about 2 s, counted from its own dial (the
	// dials, the refusal and the RSS check above take a while on a loaded machine). The
	// activity clock is coarse (a tenth of the idle time), so a close 1.5 s after the
	// dial began is the earliest a correct node can do.
	began := time.Now()
	for i, c := range conns {
		expectEOF(t, c, 10*time.Second-time.Since(began), fmt.Sprintf("idle connection %d", i))
		if idle := time.Since(dialed[i]); idle < 1500*time.Millisecond {
			t.Fatalf("idle connection %d closed %v after its dial, before connections.max.idle.ms (2 s)", i, idle)
		}
	}
	// A busy connection is not idle: it keeps answering across the idle time.
	rc := dialRaw(t, n.addr())
	for i := 0; i < 6; i++ {
		rc.apiVersions()
		time.Sleep(500 * time.Millisecond)
	}
}

// TestConnectionsPerIPAreLimited: max.connections.per.ip (here 1, overridden to 3 for
// 127.0.0.1 by max.connections.per.ip.overrides) refuses the next connection from the same
// address, and a closed connection gives its place back.
func TestConnectionsPerIPAreLimited(t *testing.T) {
	n := startInlet(t, "--max-connections-per-ip", "1", "--max-connections-per-ip-overrides", "127.0.0.1:3")
	var conns []*rawConn
	for i := 0; i < 3; i++ {
		rc := dialRaw(t, n.addr())
		rc.apiVersions()
		conns = append(conns, rc)
	}
	extra, err := net.DialTimeout("tcp", n.addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expectEOF(t, extra, 3*time.Second, "the 4th connection from 127.0.0.1 (max.connections.per.ip 3)")
	if !n.logged("refused: max.connections.per.ip reached") {
		t.Error("the refusal is not logged")
	}
	conns[0].c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", n.addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rc := &rawConn{t: t, c: c, f: conns[1].f}
		if rc.tryAPIVersions() == nil {
			c.Close()
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's place was not given back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStrayArgumentExitsNonZero: `inlet --auto-create-topics false` (a space where a boolean
// flag needs '=') used to run with auto-creation on and every later flag dropped.
func TestStrayArgumentExitsNonZero(t *testing.T) {
	out, err := exec.Command(inletBin, "--auto-create-topics", "false", "--listen", "127.0.0.1:1").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("exit: %v, want a non-zero exit; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), `unexpected argument "false"`) || !strings.Contains(string(out), "--auto-create-topics=false") {
		t.Errorf("the message does not name the argument and the fix:\n%s", out)
	}
}

// expectEOF waits up to timeout for the node to close c (EOF or reset, nothing read).
func expectEOF(t *testing.T, c net.Conn, timeout time.Duration, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(max(timeout, 100*time.Millisecond)))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	switch {
	case err == nil:
		t.Fatalf("%s: the node sent data; want it closed", what)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s: still open after %v; want it closed", what, timeout)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), strings.Contains(err.Error(), "reset"):
	default:
		t.Fatalf("%s: %v", what, err)
	}
}
