package crashtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sniDomain is the test's domain: node N is nodeN.inlet.test, which no resolver knows; the
// clients here map it to the proxy's loopback address themselves.
const sniDomain = "inlet.test"

// inCI reports whether the tests run in CI, where a missing system tool is a failure rather
// than a reason to skip (scripts/setup.sh installs them).
func inCI() bool { return os.Getenv("CI") == "true" }

// TestSNIRoutingThroughHAProxy runs the deployment of docs/operations.md "Many nodes behind
// one address": three nodes, each with a TLS listener advertising nodeN.inlet.test:<proxy port>
// and an HTTPS schema registry, behind one HAProxy configured by `inlet haproxy-config`.
// Through the proxy, kgo clients (and kcat, when the name can be mapped for it) produce and
// consume on their own node only; the registry answers for the node its server name names;
// a server name that names no node, no server name, or no TLS at all is refused.
func TestSNIRoutingThroughHAProxy(t *testing.T) {
	haproxyBin := lookTool(t, "haproxy", "/usr/sbin/haproxy")
	ca := newSNICA(t)
	kafkaFront, registryFront := freePort(t), freePort(t)

	type node struct {
		name string
		n    *inlet
	}
	var nodes []node
	var nodeMap strings.Builder
	nodeMap.WriteString("nodes:\n")
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("node%d", i)
		regPort := freePort(t)
		cfg := filepath.Join(t.TempDir(), "inlet.yaml")
		// The listener's address is replaced by startInlet's --listen (an explicit --listen
		// replaces the first listener's); what matters is what it advertises.
		writeFile(t, cfg, fmt.Sprintf(`registry_listen: 127.0.0.1:%d
registry_tls: {cert_file: %q, key_file: %q}
schemas:
  - subject: %s.events-value
    schema: '"string"'
listeners:
  - name: tls
    address: 127.0.0.1:0
    advertise: %s.%s:%d
    security_protocol: SSL
    tls: {cert_file: %q, key_file: %q}
`, regPort, ca.certFile, ca.keyFile, name, name, sniDomain, kafkaFront, ca.certFile, ca.keyFile))
		n := startInlet(t, "--config", cfg)
		n.waitLogged("schema registry listening", 10*time.Second)
		nodes = append(nodes, node{name, n})
		fmt.Fprintf(&nodeMap, "  - {name: %s, address: 127.0.0.1, kafka_port: %d, registry_port: %d}\n", name, n.port, regPort)
	}

	// The proxy's configuration comes from the command a user would run.
	mapFile := filepath.Join(t.TempDir(), "nodes.yaml")
	writeFile(t, mapFile, nodeMap.String())
	out, err := exec.Command(inletBin, "haproxy-config", "--nodes", mapFile, "--domain", sniDomain,
		"--kafka-bind", fmt.Sprintf("127.0.0.1:%d", kafkaFront), "--registry-bind", fmt.Sprintf("127.0.0.1:%d", registryFront)).Output()
	if err != nil {
		t.Fatalf("inlet haproxy-config: %v\n%s", err, stderrOf(err))
	}
	haproxyCfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	writeFile(t, haproxyCfg, string(out))
	startHAProxy(t, haproxyBin, haproxyCfg, kafkaFront, registryFront)

	// Each tenant's client knows only its node's name; every connection it opens (bootstrap,
	// the broker from Metadata, the group coordinator from FindCoordinator) must be to
	// <node>.inlet.test at the proxy's port, and lands on that node.
	const records = 100
	for _, nd := range nodes {
		host := nd.name + "." + sniDomain
		topic := "tenant-" + nd.name + ".events"
		dialed := &dialLog{}
		opts := []kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(host, strconv.Itoa(kafkaFront))), kgo.Dialer(dialed.viaResolver(ca.pool, "127.0.0.1"))}
		adm := kadm.NewClient(newClient(t, opts...))
		if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, topic); err != nil {
			t.Fatalf("create %s through the proxy: %v", topic, err)
		}
		// kgo takes the coordinator's address from Metadata; librdkafka and the Java client
		// take it from FindCoordinator, which must name the node through the proxy too.
		for _, co := range adm.FindGroupCoordinators(t.Context(), "group-"+nd.name) {
			if co.Err != nil || co.Host != host || co.Port != int32(kafkaFront) {
				t.Errorf("%s: FindCoordinator answers %s:%d (%v), want %s:%d", nd.name, co.Host, co.Port, co.Err, host, kafkaFront)
			}
		}
		produceRecords(t, topic, records, opts...)
		got := consumeRecords(t, topic, "group-"+nd.name, records, opts...)
		for i, r := range got {
			if want := fmt.Sprintf("%s %d", nd.name, i); string(r.Value) != want {
				t.Fatalf("%s: record %d is %q, want %q", topic, i, r.Value, want)
			}
		}
		// At least the seed and the broker Metadata advertised (kgo dials them separately).
		if len(dialed.list()) < 2 {
			t.Errorf("%s: the client dialed only %q", nd.name, dialed.list())
		}
		for _, a := range dialed.list() {
			if a != net.JoinHostPort(host, strconv.Itoa(kafkaFront)) {
				t.Errorf("%s: the client was sent to %s, not through the proxy as %s", nd.name, a, host)
			}
		}
	}

	t.Run("kcat", func(t *testing.T) {
		kcat := lookTool(t, "kcat", "/usr/bin/kcat")
		run := hostsMapped(t, []string{"node2." + sniDomain})
		brokers := fmt.Sprintf("node2.%s:%d", sniDomain, kafkaFront)
		sslArgs := []string{"-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca.caFile}
		const topic = "tenant-node2.kcat"
		adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(brokers), kgo.Dialer((&dialLog{}).viaResolver(ca.pool, "127.0.0.1"))))
		if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, topic); err != nil {
			t.Fatalf("create %s through the proxy: %v", topic, err)
		}
		var in bytes.Buffer
		for i := range 50 {
			fmt.Fprintf(&in, "kcat line %d\n", i)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		prod := run(ctx, kcat, append([]string{"-P", "-b", brokers, "-t", topic, "-p", "0"}, sslArgs...)...)
		prod.Stdin = bytes.NewReader(in.Bytes())
		if out, err := prod.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P through the proxy: %v\n%s", err, out)
		}
		cons := run(ctx, kcat, append([]string{"-C", "-b", brokers, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", `%s\n`}, sslArgs...)...)
		var stdout, stderr bytes.Buffer
		cons.Stdout, cons.Stderr = &stdout, &stderr
		if err := cons.Run(); err != nil {
			t.Fatalf("kcat -C through the proxy: %v\n%s", err, stderr.Bytes())
		}
		if !bytes.Equal(stdout.Bytes(), in.Bytes()) {
			t.Fatalf("kcat -C read back %q, want %q", stdout.Bytes(), in.Bytes())
		}
	})

	// Straight to each node's own listener (not through the proxy): its tenant's topics are
	// there with every record, and no other tenant's topic is.
	for _, nd := range nodes {
		own := "tenant-" + nd.name + "."
		direct := func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{RootCAs: ca.pool, ServerName: nd.name + "." + sniDomain}}
			return d.DialContext(ctx, network, nd.n.addr())
		}
		adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(nd.n.addr()), kgo.Dialer(direct)))
		topics, err := adm.ListTopics(t.Context())
		if err != nil {
			t.Fatalf("%s: list topics: %v", nd.name, err)
		}
		var names []string
		for _, td := range topics.Sorted() {
			names = append(names, td.Topic)
			if !strings.HasPrefix(td.Topic, own) {
				t.Errorf("%s holds %s, another tenant's topic", nd.name, td.Topic)
			}
		}
		if !slices.Contains(names, own+"events") {
			t.Fatalf("%s does not hold %sevents (it holds %q)", nd.name, own, names)
		}
		ends, err := adm.ListEndOffsets(t.Context(), own+"events")
		if err != nil || ends.Error() != nil {
			t.Fatalf("%s: end offsets: %v %v", nd.name, err, ends.Error())
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		if sum != records {
			t.Errorf("%s: %sevents holds %d records, want %d", nd.name, own, sum, records)
		}
	}

	// The registry answers through the proxy for the node the server name names.
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return resolveTo(ctx, network, addr, "127.0.0.1")
		},
		TLSClientConfig: &tls.Config{RootCAs: ca.pool},
	}}
	for _, nd := range nodes {
		resp, err := httpc.Get(fmt.Sprintf("https://%s.%s:%d/subjects", nd.name, sniDomain, registryFront))
		if err != nil {
			t.Fatalf("registry of %s through the proxy: %v", nd.name, err)
		}
		var subjects []string
		err = json.NewDecoder(resp.Body).Decode(&subjects)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !slices.Equal(subjects, []string{nd.name + ".events-value"}) {
			t.Errorf("registry of %s through the proxy: %d %q %v", nd.name, resp.StatusCode, subjects, err)
		}
	}

	// Refused: a name that is no node's, no name at all, and bytes that are not TLS.
	for _, front := range []int{kafkaFront, registryFront} {
		addr := fmt.Sprintf("127.0.0.1:%d", front)
		for _, sni := range []string{"node9." + sniDomain, "node1.example.com", ""} {
			// Not verifying the certificate: only the proxy may end these handshakes. With
			// no ServerName, dialing an IP address sends no server name.
			cfg := &tls.Config{InsecureSkipVerify: true, ServerName: sni}
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
			if err == nil {
				c.Close()
				t.Errorf("proxy %s completed a TLS handshake for server name %q", addr, sni)
			}
		}
		if err := expectClosed(addr, []byte("\x00\x00\x00\x15\x00\x12\x00\x00\x00\x00\x00\x01\x00\x07crashtest")); err != nil {
			t.Errorf("proxy %s, plain bytes: %v", addr, err)
		}
	}
}

// lookTool finds a system tool (on PATH or at path): in CI a missing tool fails the test,
// elsewhere it skips it.
func lookTool(t *testing.T, name, path string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if inCI() {
		t.Fatalf("%s is not installed: make test installs it (scripts/setup.sh)", name)
	}
	t.Skipf("%s is not installed (Debian package %s; scripts/setup.sh installs it, and CI fails without it)", name, name)
	return ""
}

// startHAProxy runs haproxy -db on cfg until the test ends and waits until it accepts on the
// given loopback ports. Its log is printed if the test fails.
func startHAProxy(t *testing.T, bin, cfg string, ports ...int) {
	t.Helper()
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c -f %s: %v\n%s", cfg, err, out)
	}
	logPath := filepath.Join(t.TempDir(), "haproxy.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", cfg, "-db")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("haproxy: %v", err)
	}
	logf.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("haproxy log (%s):\n%s\nconfiguration:\n%s", logPath, b, mustRead(cfg))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range ports {
		for {
			select {
			case <-exited:
				b, _ := os.ReadFile(logPath)
				t.Fatalf("haproxy exited before it listened on %d:\n%s", p, b)
			default:
			}
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("haproxy does not listen on %d after 10s", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("haproxy (pid %d) listening on %v", cmd.Process.Pid, ports)
}

// dialLog is a kgo dialer that resolves every name to one address (as DNS would resolve
// *.inlet.test to the proxy), keeps the port, and speaks TLS with the name as server name. It
// records every host:port it was asked for.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) viaResolver(roots *x509.CertPool, ip string) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, hostport string) (net.Conn, error) {
		d.mu.Lock()
		d.addrs = append(d.addrs, hostport)
		d.mu.Unlock()
		host, _, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, err
		}
		c, err := resolveTo(ctx, network, hostport, ip)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: host})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
}

func (d *dialLog) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

// resolveTo dials hostport's port on ip, if the host is under sniDomain.
func resolveTo(ctx context.Context, network, hostport, ip string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(host, "."+sniDomain) {
		return nil, fmt.Errorf("test resolver: %s is not under %s", host, sniDomain)
	}
	return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, net.JoinHostPort(ip, port))
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceRecords writes n records "<node> i" (the node from the topic name) to partition 0
// of topic and waits for every acknowledgement.
func produceRecords(t *testing.T, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	node := strings.TrimSuffix(strings.TrimPrefix(topic, "tenant-"), ".events")
	cl := newClient(t, append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Value: fmt.Appendf(nil, "%s %d", node, i)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// consumeRecords reads n records of topic as a member of group (FindCoordinator, JoinGroup,
// SyncGroup, Fetch) and commits them.
func consumeRecords(t *testing.T, topic, group string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: %d of %d records after 30s", topic, len(got), n)
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("consume %s: %v", topic, err)
		}
		got = append(got, fs.Records()...)
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit %s: %v", group, err)
	}
	return got
}

// hostsMapped returns how to run a command for which names resolve to 127.0.0.1. kcat
// (librdkafka) resolves with the C library and has no host map of its own, so the names must
// be in /etc/hosts: in a private mount namespace (unshare), a file of ours is bind-mounted
// over /etc/hosts for that command alone. Where namespaces are not allowed, CI (as root)
// adds the names to /etc/hosts itself and restores the file afterwards; elsewhere the caller
// is skipped.
func hostsMapped(t *testing.T, names []string) func(ctx context.Context, name string, args ...string) *exec.Cmd {
	t.Helper()
	line := "127.0.0.1 " + strings.Join(names, " ") + "\n"
	hosts := filepath.Join(t.TempDir(), "hosts")
	writeFile(t, hosts, "127.0.0.1 localhost\n::1 localhost\n"+line)
	unshare := []string{"unshare", "--mount"}
	if os.Geteuid() != 0 {
		unshare = append(unshare, "--map-root-user")
	}
	wrap := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		a := append(slices.Clone(unshare[1:]), "--", "sh", "-c", `mount --bind "$1" /etc/hosts && shift && exec "$@"`, "sh", hosts, name)
		return exec.CommandContext(ctx, unshare[0], append(a, args...)...)
	}
	probe, err := wrap(t.Context(), "getent", "hosts", names[0]).CombinedOutput()
	if err == nil && strings.HasPrefix(string(probe), "127.0.0.1") {
		return wrap
	}
	why := fmt.Sprintf("a private mount namespace is not available here (%v: %s)", err, bytes.TrimSpace(probe))
	if inCI() && os.Geteuid() == 0 {
		orig, err := os.ReadFile("/etc/hosts")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: adding %q to /etc/hosts for this test", why, strings.TrimSpace(line))
		if err := os.WriteFile("/etc/hosts", append(slices.Clone(orig), "\n"+line...), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile("/etc/hosts", orig, 0o644); err != nil {
				t.Errorf("restore /etc/hosts: %v", err)
			}
		})
		return exec.CommandContext
	}
	if inCI() {
		t.Fatalf("cannot make %s resolve for kcat: %s, and not root to edit /etc/hosts", names[0], why)
	}
	t.Skipf("cannot make %s resolve for kcat: %s (CI runs this part as root)", names[0], why)
	return nil
}

// expectClosed writes b to addr and expects the peer to close the connection without
// answering, within 10 s (the proxy's inspect delay is 5 s).
func expectClosed(addr string, b []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		return nil // already closed
	}
	n, err := io.Copy(io.Discard, c)
	if n > 0 {
		return fmt.Errorf("%d bytes answered", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("still open after 10s")
	}
	return nil
}

// sniCA is a self-signed CA and one certificate for *.inlet.test, in files for the nodes and
// for kcat, and as a pool for Go clients.
type sniCA struct {
	pool                      *x509.CertPool
	caFile, certFile, keyFile string
}

func newSNICA(t *testing.T) *sniCA {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "inlet crashtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "*." + sniDomain},
		DNSNames: []string{"*." + sniDomain}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &sniCA{pool: x509.NewCertPool(), caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem")}
	ca.pool.AddCert(caCert)
	writeFile(t, ca.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, ca.certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, ca.keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return ca
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
