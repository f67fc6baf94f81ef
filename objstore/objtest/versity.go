// Package objtest starts a real S3 server for tests: versitygw (github.com/versity/versitygw,
// Apache-2.0) with its posix backend in a test's temporary directory, on a free loopback port.
// StartVersity finds the binary, starts it, waits until it answers, creates a bucket and stops
// the server when the test ends; Stop and Restart take it down and bring it back on the same
// port and directory, so a test can watch its code ride out an outage.
//
// The posix backend maps keys onto directories, which S3 does not: a key cannot also be the
// directory of another ("a" and "a/b" cannot both exist; the second Put fails with 409
// ObjectParentIsFile or ExistingObjectIsDirectory). A key layout that passes here therefore
// also suits S3; Memory does not check this.
//
// scripts/setup.sh installs the binary (go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0). Without it the test is skipped, unless
// the environment variable CI is set, where a missing server fails the test.
package objtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"inlet/objstore"
)

// Server is one running versitygw.
type Server struct {
	// Endpoint is the server's base URL, "http://127.0.0.1:PORT" ("https://" from
	// StartVersityTLS).
	Endpoint string
	// Bucket exists and is empty at start.
	Bucket string
	// AccessKey and SecretKey are the root account's keys.
	AccessKey, SecretKey string
	// Region is what clients sign with; versitygw accepts any, this one is the default.
	Region string
	// CAFile is the PEM file of the server's self-signed certificate when it serves https
	// (StartVersityTLS), for AWS_CA_BUNDLE; empty for plain http.
	CAFile string

	t    testing.TB
	tls  *tls.Config // the client side, with CAFile's pool; nil for http
	bin  string
	addr string
	dir  string
	log  string

	mu     sync.Mutex
	cmd    *exec.Cmd  // nil while stopped
	exited chan error // cmd.Wait's result
}

// startTimeout bounds the wait for a started server to answer; versitygw answers within a
// few hundred milliseconds here, the rest is headroom for a loaded machine.
const startTimeout = 20 * time.Second

// StartVersity starts versitygw for t and returns it with a bucket created; it is stopped at
// t.Cleanup.
func StartVersity(t testing.TB) *Server {
	t.Helper()
	return startVersity(t, false)
}

// StartVersityTLS is StartVersity serving https with a self-signed certificate for 127.0.0.1,
// whose PEM is in Server.CAFile. A client of the standard chain trusts it through
// AWS_CA_BUNDLE=CAFile.
func StartVersityTLS(t testing.TB) *Server {
	t.Helper()
	return startVersity(t, true)
}

func startVersity(t testing.TB, useTLS bool) *Server {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("objtest: %v (CI is set, so this fails rather than skips; run scripts/setup.sh)", err)
		}
		t.Skipf("objtest: %v; run scripts/setup.sh to install it", err)
	}
	root := t.TempDir()
	s := &Server{
		Bucket:    "inlet-test",
		AccessKey: "inlettestaccess",
		SecretKey: "inlettestsecretkey0123456789",
		Region:    "us-east-1",
		t:         t,
		bin:       bin,
		dir:       filepath.Join(root, "gw"),
		log:       filepath.Join(root, "versitygw.log"),
	}
	if err := os.Mkdir(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if useTLS {
		if err := s.makeCert(root); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.Stop)
	// The free port is closed before versitygw binds it, so another process can take it in
	// between; the server then exits at start, and a new port is tried.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.Endpoint = "http://" + s.addr
		if useTLS {
			s.Endpoint = "https://" + s.addr
		}
		err = s.start()
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("objtest: retrying on another port: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.Bucket}); err != nil {
		t.Fatalf("objtest: creating bucket %s: %v\n%s", s.Bucket, err, s.Log())
	}
	return s
}

// findBinary looks on PATH, then in $(go env GOPATH)/bin, where go install puts it.
func findBinary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		out, err := exec.Command("go", "env", "GOPATH").Output()
		if err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("versitygw not found on PATH nor in $(go env GOPATH)/bin")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the binary and waits until it answers HTTP.
func (s *Server) start() error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	args := []string{"--port", s.addr}
	if s.CAFile != "" {
		// The certificate is its own CA: the same file serves both.
		args = append(args, "--cert", s.CAFile, "--key", s.keyFile())
	}
	cmd := exec.Command(s.bin, append(args, "posix", s.dir)...)
	// versitygw reads ROOT_ACCESS_KEY_ID before ROOT_ACCESS_KEY (and the same for the
	// secret): both are set, so that one inherited from the caller cannot win.
	cmd.Env = append(os.Environ(),
		"ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey,
		"ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("objtest: starting %s: %w", s.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(startTimeout)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: s.tls}}
	defer hc.CloseIdleConnections()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("objtest: versitygw exited at start (%v):\n%s", err, s.Log())
		default:
		}
		// Any HTTP answer (an unauthenticated request gets 403) means it serves.
		if resp, err := hc.Get(s.Endpoint + "/"); err == nil {
			resp.Body.Close()
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			s.kill(cmd, exited)
			return fmt.Errorf("objtest: versitygw did not answer on %s within %v:\n%s", s.addr, startTimeout, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends cmd by its pid and waits for it.
func (s *Server) kill(cmd *exec.Cmd, exited chan error) {
	_ = cmd.Process.Kill()
	<-exited
}

// Stop kills the server (SIGKILL to its pid, as a crash would) and waits for it to exit; its
// directory stays. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.exited = nil, nil
	s.mu.Unlock()
	if cmd != nil {
		s.kill(cmd, exited)
	}
}

// Restart starts a stopped server again on the same port and directory (it stops a running
// one first), and waits until it answers. Objects written before are still there. Like
// t.Fatal, which it calls if the server does not come back, it belongs on the test's
// goroutine.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// Log returns what the server has written to its stdout and stderr so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// Env returns the environment a child process needs to reach the server through the standard
// AWS chain: the root keys, the region and, for https, AWS_CA_BUNDLE.
func (s *Server) Env() []string {
	env := []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
	}
	if s.CAFile != "" {
		env = append(env, "AWS_CA_BUNDLE="+s.CAFile)
	}
	return env
}

// Config returns the objstore configuration for the server's bucket under prefix, with the
// root keys as static credentials (so that tests need not set the process's environment).
// Over https the process must trust CAFile: t.Setenv("AWS_CA_BUNDLE", s.CAFile).
func (s *Server) Config(prefix string) objstore.S3Config {
	return objstore.S3Config{
		Bucket:      s.Bucket,
		Endpoint:    s.Endpoint,
		Region:      s.Region,
		Prefix:      prefix,
		PathStyle:   true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}
}

// Open opens the server's bucket under prefix, failing t on error.
func (s *Server) Open(prefix string) objstore.Bucket {
	s.t.Helper()
	b, err := objstore.OpenS3(context.Background(), s.Config(prefix))
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// Client returns a raw S3 client for the server, for what Bucket does not do (creating
// buckets, inspecting objects).
func (s *Server) Client() *s3.Client {
	var hc s3.HTTPClient
	if s.tls != nil {
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: s.tls}}
	}
	return s3.New(s3.Options{
		HTTPClient:   hc,
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

func (s *Server) keyFile() string { return strings.TrimSuffix(s.CAFile, "cert.pem") + "key.pem" }

// makeCert writes a self-signed ECDSA certificate for 127.0.0.1 and localhost, valid for a day,
// to dir/cert.pem and its key to dir/key.pem.
func (s *Server) makeCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "objtest versitygw"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	s.CAFile = filepath.Join(dir, "cert.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(s.CAFile, certPEM, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(s.keyFile(), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	s.tls = &tls.Config{RootCAs: pool}
	return nil
}
