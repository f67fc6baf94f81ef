package crashtest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Descriptor exhaustion against the real binary, started with its descriptor limit lowered
// (soft and hard: `ulimit -n` in the shell that execs it). A flood of connections past what
// the limit holds must not stop the listener (gnet's own acceptor would shut its engine down at
// the first EMFILE, dropping every connection, and the port would stay dead until a restart):
// a kgo producer connected before the flood keeps being answered (p99 under 1 s), /readyz
// says 503 while the listener cannot accept, and once the flood has closed a new connection
// is served and /readyz says ready within a second. With the default max.connections
// (derived from the limit, cmd/inlet/rlimit.go) the flood is refused at the limit and accept
// never fails at all.

const descriptorLimit = 256

// startWithFileLimit starts a node whose RLIMIT_NOFILE is nofile (soft and hard), with args.
func startWithFileLimit(t *testing.T, nofile int, args ...string) *inlet {
	t.Helper()
	n := &inlet{t: t, dir: filepath.Join(t.TempDir(), "data"), nofile: nofile, args: args}
	n.logPath = filepath.Join(t.TempDir(), "inlet.log")
	t.Cleanup(func() {
		if n.running() {
			n.kill()
		}
		if t.Failed() {
			t.Logf("inlet log tail (%s):\n%s", n.logPath, n.logTail(60))
		}
	})
	n.start()
	return n
}

// flood opens up to conns connections to addr and holds them; dials that fail (the backlog
// full, or the node closing them) are skipped.
func flood(addr string, conns int) []net.Conn {
	var out []net.Conn
	for range conns {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			continue
		}
		out = append(out, c)
	}
	return out
}

// readyz answers /readyz's status over client (whose connection, opened before the flood, is
// kept alive: a node out of descriptors cannot accept a new one on its metrics listener
// either).
func readyz(client *http.Client, metrics string) (int, string) {
	resp, err := client.Get("http://" + metrics + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// scrapeValue is the value of the first series of name in the node's /metrics (0 if absent).
func scrapeValue(client *http.Client, metrics, name string) float64 {
	resp, err := client.Get("http://" + metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	m := regexp.MustCompile(`(?m)^` + name + `(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(b.String())
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

func TestDescriptorExhaustionKeepsTheListener(t *testing.T) {
	if b := os.Getenv("CRASHTEST_INLET_BIN"); b != "" {
		inletBin = b // another build, to measure it (as in bombs_test.go)
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to lower the descriptor limit with")
	}
	// --max-connections far above the limit, so the flood runs the node out of descriptors.
	n := startWithFileLimit(t, descriptorLimit, "--metrics-listen", "127.0.0.1:0", "--max-connections", "100000")
	metrics := n.metricsAddr()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	for began := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		code, body := readyz(client, metrics)
		if code == http.StatusOK {
			break
		}
		if time.Since(began) > readyTimeout { // "listening" is logged before start-up ends
			t.Fatalf("/readyz before the flood: %d %q", code, body)
		}
	}
	b := newBystander(t, n.addr(), n.addr(), "descriptors", 100)

	// The bystander produces on its connection, opened before the flood, all along.
	var mu sync.Mutex
	var lat []time.Duration
	var lastErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			d, err := b.produceOne(bystanderTimout)
			mu.Lock()
			if err != nil {
				d, lastErr = bystanderTimout, err
			}
			lat = append(lat, d)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()

	conns := flood(n.addr(), 2*descriptorLimit)
	// While accepting fails, /readyz says so (the listener named) and the error is counted.
	unready := ""
	deadline := time.Now().Add(5 * time.Second)
	for unready == "" && time.Now().Before(deadline) {
		if code, body := readyz(client, metrics); code == http.StatusServiceUnavailable {
			unready = body
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(unready, "not accepting") {
		t.Errorf("/readyz never said a listener was not accepting during the flood (%d connections held); last: %q", len(conns), unready)
	}
	if v := scrapeValue(client, metrics, "inlet_listener_accept_errors_total"); v <= 0 {
		t.Errorf("inlet_listener_accept_errors_total %v during the flood", v)
	}
	time.Sleep(time.Second) // exhaustion held a while: the bystander keeps producing

	for _, c := range conns {
		c.Close()
	}
	closed := time.Now()
	// A new connection is served within a second of the flood closing, and /readyz is 200.
	var served time.Duration
	for served == 0 && time.Since(closed) < 3*time.Second {
		if _, err := freshAPIVersions(n.addr(), time.Second); err == nil {
			served = time.Since(closed)
		}
	}
	if served == 0 || served > time.Second {
		t.Errorf("a new connection was served %v after the flood closed, want within 1 s", served)
	}
	var ready time.Duration
	for ready == 0 && time.Since(closed) < 3*time.Second {
		if code, _ := readyz(client, metrics); code == http.StatusOK {
			ready = time.Since(closed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ready == 0 || ready > time.Second {
		t.Errorf("/readyz ready again %v after the flood closed, want within 1 s", ready)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	p := p99(lat)
	t.Logf("flood of %d connections against a limit of %d: bystander produce p99 %v over %d requests; new connection served %v and ready %v after the flood closed; /readyz during it: %q",
		len(conns), descriptorLimit, p, len(lat), served, ready, strings.TrimSpace(unready))
	if len(lat) == 0 || p >= livenessP99 {
		t.Errorf("bystander produce p99 %v over %d requests during the flood, want under %v (last error %v)", p, len(lat), livenessP99, lastErr)
	}
	mu.Unlock()
	if !n.running() {
		t.Fatal("the node exited")
	}
}

// TestDefaultMaxConnectionsHoldsTheFlood: with max.connections left to its default, derived
// from the descriptor limit, the flood is refused at max.connections and accept never fails.
func TestDefaultMaxConnectionsHoldsTheFlood(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to lower the descriptor limit with")
	}
	n := startWithFileLimit(t, descriptorLimit, "--metrics-listen", "127.0.0.1:0")
	metrics := n.metricsAddr()
	n.waitLogged("max.connections from the descriptor limit", 5*time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	conns := flood(n.addr(), 2*descriptorLimit)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for scrapeValue(client, metrics, `inlet_connections_refused_total\{reason="max.connections reached"\}`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no connection refused for max.connections during the flood")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := scrapeValue(client, metrics, "inlet_listener_accept_errors_total"); v != 0 {
		t.Errorf("inlet_listener_accept_errors_total %v with the default max.connections, want 0", v)
	}
	if code, body := readyz(client, metrics); code != http.StatusOK {
		t.Errorf("/readyz %d %q while the flood is held at max.connections", code, body)
	}
	if d, err := freshAPIVersions(n.addr(), time.Second); err == nil {
		t.Errorf("a connection past max.connections was answered (%v)", d)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	time.Sleep(100 * time.Millisecond)
	if d, err := freshAPIVersions(n.addr(), time.Second); err != nil || d > time.Second {
		t.Errorf("after the flood a new connection took %v (err %v)", d, err)
	}
}
