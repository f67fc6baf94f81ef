package registry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"inlet/httplimit"
	"inlet/httplimit/limittest"
	"inlet/schema"
)

// TestStartTLSServesHTTPS: with a TLS config the registry answers HTTPS (for the certificate's
// name) and refuses plain HTTP.
func TestStartTLSServesHTTPS(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node1.inlet.test"},
		DNSNames: []string{"node1.inlet.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	reg, err := schema.New([]schema.Def{{Subject: "s-value", Type: schema.Avro, Text: `"string"`}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := StartTLS("127.0.0.1:0", reg, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close(t.Context()) })

	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "node1.inlet.test"}}}
	resp, err := c.Get("https://" + rs.Addr() + "/subjects")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var subjects []string
	if err := json.NewDecoder(resp.Body).Decode(&subjects); err != nil || resp.StatusCode != 200 || len(subjects) != 1 || subjects[0] != "s-value" {
		t.Fatalf("GET /subjects over HTTPS: %d %v %v", resp.StatusCode, subjects, err)
	}

	plain := &http.Client{Timeout: 10 * time.Second}
	resp, err = plain.Get("http://" + rs.Addr() + "/subjects")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || !strings.Contains(string(b), "HTTPS") {
			t.Fatalf("plain HTTP to the HTTPS registry: %d %q", resp.StatusCode, b)
		}
	}
}

// TestRegistryConnectionLimits: the registry's listener closes idle connections and bodies
// that stop arriving, and serves at most MaxConns connections at once (the others wait). It
// used to set only a header timeout, so each such connection held a goroutine for ever.
func TestRegistryConnectionLimits(t *testing.T) {
	reg, err := schema.New([]schema.Def{{Subject: "s-value", Type: schema.Avro, Text: `"string"`}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := httplimit.Limits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, IdleTimeout: 700 * time.Millisecond, MaxConns: 2}
	rs, err := StartWith("127.0.0.1:0", reg, nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close(t.Context()) })
	t.Run("idle", func(t *testing.T) { limittest.IdleIsClosed(t, rs.Addr(), "/subjects", lim.IdleTimeout) })
	t.Run("slow body", func(t *testing.T) {
		limittest.SlowBodyIsCut(t, rs.Addr(), "/subjects/s-value/versions", lim.ReadTimeout)
	})
	t.Run("cap", func(t *testing.T) { limittest.ConnsPastTheCapWait(t, rs.Addr(), "/subjects", lim.MaxConns) })
}
