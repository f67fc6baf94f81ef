package e2e

import (
	"bytes"
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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"inlet/auth"
	"inlet/conn"
	"inlet/server"
)

// testCA is a certificate authority made in the test, a server certificate for 127.0.0.1
// and a client certificate for "alice" (mTLS).
type testCA struct {
	pool             *x509.CertPool
	caPEM            []byte
	server, client   tls.Certificate
	dir              string // caPEM, client cert and key as files, for librdkafka and kcat
	caFile, certFile string
	keyFile          string
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "inlet test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) (tls.Certificate, []byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
			DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, certPEM, keyPEM
	}
	ca := &testCA{pool: x509.NewCertPool(), caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), dir: t.TempDir()}
	ca.pool.AddCert(caCert)
	ca.server, _, _ = leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	var certPEM, keyPEM []byte
	ca.client, certPEM, keyPEM = leaf(3, "alice", x509.ExtKeyUsageClientAuth, nil)
	ca.caFile, ca.certFile, ca.keyFile = filepath.Join(ca.dir, "ca.pem"), filepath.Join(ca.dir, "client.pem"), filepath.Join(ca.dir, "client-key.pem")
	for f, b := range map[string][]byte{ca.caFile: ca.caPEM, ca.certFile: certPEM, ca.keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca
}

func (ca *testCA) serverTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{ca.server}, ClientCAs: ca.pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
}

func (ca *testCA) clientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1"}
	if withCert {
		c.Certificates = []tls.Certificate{ca.client}
	}
	return c
}

func testUsers(t testing.TB) *auth.Users {
	t.Helper()
	var us []auth.User
	for _, u := range []struct{ name, pw, prefix string }{{"alice", "alice-secret", "alice."}, {"bob", "bob-secret", "bob."}} {
		c256, err := auth.NewCredential(auth.ScramSHA256, u.pw, auth.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		c512, err := auth.NewCredential(auth.ScramSHA512, u.pw, auth.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, auth.User{Principal: auth.Principal{Name: u.name, TopicPrefixes: []string{u.prefix}}, SHA256: &c256, SHA512: &c512})
	}
	users, err := auth.NewUsers(us)
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// secureBroker serves four listeners: SASL_PLAINTEXT first (so on gnet's loops), a PLAINTEXT
// listener limited to "public.", SASL_SSL, and SSL with optional client certificates.
func secureBroker(t testing.TB, ca *testCA, mod func(*server.Config)) *broker {
	return startBroker(t, func(c *server.Config) {
		c.Users = testUsers(t)
		c.Listeners = []conn.Listener{
			{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"},
			{Name: "public", Address: "127.0.0.1:0", Protocol: "PLAINTEXT", Anonymous: &auth.Principal{Name: "ANONYMOUS", TopicPrefixes: []string{"public."}}},
			{Name: "sasl_ssl", Address: "127.0.0.1:0", Protocol: "SASL_SSL", TLS: ca.serverTLS()},
			{Name: "ssl", Address: "127.0.0.1:0", Protocol: "SSL", TLS: ca.serverTLS(), Anonymous: &auth.Principal{Name: "ANONYMOUS", TopicPrefixes: []string{"public."}}},
		}
		if mod != nil {
			mod(c)
		}
	})
}

func mechanisms(user, pw string) map[string]sasl.Mechanism {
	return map[string]sasl.Mechanism{
		"PLAIN":         plain.Auth{User: user, Pass: pw}.AsMechanism(),
		"SCRAM-SHA-256": scram.Auth{User: user, Pass: pw}.AsSha256Mechanism(),
		"SCRAM-SHA-512": scram.Auth{User: user, Pass: pw}.AsSha512Mechanism(),
	}
}

// roundTripKgo produces n records to topic through opts and reads them back the same way.
func roundTripKgo(t *testing.T, addr, topic string, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := makeRecords(20, 1, topic)
	kgoProduce(ctx, t, cl, topic, recs)
	got := kgoConsume(ctx, t, addr, topic, 1, len(recs), opts...)
	checkRecords(t, recs, got)
}

// TestSecurityProtocolsKgo: kgo with every SASL mechanism over SASL_PLAINTEXT (gnet) and
// SASL_SSL (crypto/tls), PLAINTEXT limited to public., and SSL with a client certificate that
// maps to alice.
func TestSecurityProtocolsKgo(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	for name, mech := range mechanisms("alice", "alice-secret") {
		t.Run("SASL_PLAINTEXT/"+name, func(t *testing.T) {
			roundTripKgo(t, b.srv.ListenerAddr("sasl"), "alice.plain-"+strings.ToLower(name), kgo.SASL(mech))
		})
		t.Run("SASL_SSL/"+name, func(t *testing.T) {
			roundTripKgo(t, b.srv.ListenerAddr("sasl_ssl"), "alice.ssl-"+strings.ToLower(name), kgo.SASL(mech), kgo.DialTLSConfig(ca.clientTLS(false)))
		})
	}
	t.Run("PLAINTEXT", func(t *testing.T) {
		roundTripKgo(t, b.srv.ListenerAddr("public"), "public.events")
	})
	t.Run("SSL/anonymous", func(t *testing.T) {
		roundTripKgo(t, b.srv.ListenerAddr("ssl"), "public.tls", kgo.DialTLSConfig(ca.clientTLS(false)))
	})
	t.Run("SSL/client-certificate", func(t *testing.T) {
		// The certificate's CN is alice: alice's prefixes, not the anonymous ones.
		roundTripKgo(t, b.srv.ListenerAddr("ssl"), "alice.mtls", kgo.DialTLSConfig(ca.clientTLS(true)))
	})
	t.Run("SSL/client-certificate-outside-prefix", func(t *testing.T) {
		expectTopicDenied(t, b, b.srv.ListenerAddr("ssl"), "public.by-alice", kgo.DialTLSConfig(ca.clientTLS(true)))
	})
}

// expectTopicDenied produces to topic and wants TOPIC_AUTHORIZATION_FAILED, and the topic
// not created.
func expectTopicDenied(t *testing.T, b *broker, addr, topic string, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
	}
	if _, ok := b.blog.Topic(topic); ok {
		t.Fatalf("topic %s was created for a principal outside its prefix", topic)
	}
}

// TestSASLFailures: wrong password and unknown user are SASL_AUTHENTICATION_FAILED (58) for
// every mechanism; an unknown mechanism is UNSUPPORTED_SASL_MECHANISM (33); SaslAuthenticate
// without a handshake is ILLEGAL_SASL_STATE (34); any other request before authentication
// closes the connection.
func TestSASLFailures(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	addr := b.srv.ListenerAddr("sasl")
	for _, creds := range []struct{ what, user, pw string }{{"wrong password", "alice", "bob-secret"}, {"unknown user", "mallory", "alice-secret"}} {
		for name, mech := range mechanisms(creds.user, creds.pw) {
			t.Run(creds.what+"/"+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0))
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				err = cl.Ping(ctx)
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("ping with %s: %v, want SASL_AUTHENTICATION_FAILED", creds.what, err)
				}
			})
		}
	}

	t.Run("unknown mechanism", func(t *testing.T) {
		rc := dialRaw(t, addr)
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, "GSSAPI"
		resp := rc.roundTrip(req).(*kmsg.SASLHandshakeResponse)
		if resp.ErrorCode != 33 {
			t.Fatalf("handshake GSSAPI: error %d, want 33 UNSUPPORTED_SASL_MECHANISM", resp.ErrorCode)
		}
		if fmt.Sprint(resp.SupportedMechanisms) != fmt.Sprint(auth.Mechanisms) {
			t.Fatalf("supported mechanisms %v", resp.SupportedMechanisms)
		}
		rc.expectClosed()
	})
	t.Run("authenticate without handshake", func(t *testing.T) {
		rc := dialRaw(t, addr)
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, []byte("\x00alice\x00alice-secret")
		resp := rc.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 34 {
			t.Fatalf("SaslAuthenticate first: error %d, want 34 ILLEGAL_SASL_STATE", resp.ErrorCode)
		}
		rc.expectClosed()
	})
	t.Run("wrong password raw", func(t *testing.T) {
		rc := dialRaw(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		if r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake: %d", r.ErrorCode)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, []byte("\x00alice\x00nope")
		resp := rc.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 58 || resp.ErrorMessage == nil {
			t.Fatalf("bad password: error %d, want 58 SASL_AUTHENTICATION_FAILED with a message", resp.ErrorCode)
		}
		rc.expectClosed()
	})
	t.Run("metadata before authentication", func(t *testing.T) {
		rc := dialRaw(t, addr)
		rc.alive() // ApiVersions is served before authentication
		rc.send(kmsg.NewPtrMetadataRequest())
		rc.expectClosed()
	})
	t.Run("handshake on plaintext listener", func(t *testing.T) {
		rc := dialRaw(t, b.srv.ListenerAddr("public"))
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, "PLAIN"
		if r := rc.roundTrip(req).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 34 {
			t.Fatalf("handshake on PLAINTEXT: %d, want 34", r.ErrorCode)
		}
	})
	t.Run("handshake v0 raw tokens", func(t *testing.T) {
		// KIP-43's legacy flow: after SaslHandshake v0 the token travels without a header.
		rc := dialRaw(t, addr)
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 0, "PLAIN"
		if r := rc.roundTrip(req).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake v0: %d", r.ErrorCode)
		}
		tok := []byte("\x00alice\x00alice-secret")
		frame := append([]byte{0, 0, 0, byte(len(tok))}, tok...)
		rc.write(frame)
		var n [4]byte
		rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := rc.c.Read(n[:]); err != nil || !bytes.Equal(n[:], []byte{0, 0, 0, 0}) {
			t.Fatalf("raw PLAIN answer %v %v, want an empty token", n, err)
		}
		rc.c.SetReadDeadline(time.Time{})
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		resp := rc.roundTrip(md).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 {
			t.Fatalf("metadata after raw authentication: %+v", resp.Brokers)
		}
	})
}

// TestPrefixScoping: a user writing outside its prefix is refused and no topic is created;
// Metadata shows a principal only its topics; fetch and list offsets of another's topic are
// refused.
func TestPrefixScoping(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	addr := b.srv.ListenerAddr("sasl")
	alice := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())
	bob := kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism())
	b.createTopic("alice.mine", 1)
	b.createTopic("bob.theirs", 1)

	expectTopicDenied(t, b, addr, "bob.new-by-alice", alice)
	expectTopicDenied(t, b, addr, "elsewhere", bob)
	expectTopicDenied(t, b, b.srv.ListenerAddr("public"), "alice.from-public")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), alice)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range md.Topics {
		if !strings.HasPrefix(*tp.Topic, "alice.") {
			t.Errorf("alice's metadata lists %s", *tp.Topic)
		}
	}
	if len(md.Topics) == 0 {
		t.Error("alice's metadata lists none of her topics")
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("bob.theirs")}, {Topic: kmsg.StringPtr("bob.unmade")}}
	mreq.AllowAutoTopicCreation = true
	kresp, err := cl.Broker(1).Request(ctx, mreq)
	if err != nil {
		t.Fatal(err)
	}
	md = kresp.(*kmsg.MetadataResponse)
	if len(md.Topics) != 2 {
		t.Errorf("metadata for two of bob's topics answers %d", len(md.Topics))
	}
	for _, tp := range md.Topics {
		if tp.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(tp.Partitions) != 0 {
			t.Errorf("metadata for %s: error %d with %d partitions, want TOPIC_AUTHORIZATION_FAILED", *tp.Topic, tp.ErrorCode, len(tp.Partitions))
		}
	}
	if _, ok := b.blog.Topic("bob.unmade"); ok {
		t.Error("metadata auto-created bob.unmade for alice")
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "bob.theirs"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	klresp, err := cl.Broker(1).Request(ctx, lo)
	if err != nil {
		t.Fatal(err)
	}
	lresp := klresp.(*kmsg.ListOffsetsResponse)
	if len(lresp.Topics) != 1 || lresp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("list offsets of bob.theirs: %+v", lresp.Topics)
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "bob.created", NumPartitions: 1, ReplicationFactor: 1}, {Topic: "alice.created", NumPartitions: 1, ReplicationFactor: 1}}
	kcresp, err := cl.Broker(1).Request(ctx, ct)
	if err != nil {
		t.Fatal(err)
	}
	cresp := kcresp.(*kmsg.CreateTopicsResponse)
	for _, tp := range cresp.Topics {
		want := int16(0)
		if tp.Topic == "bob.created" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if tp.ErrorCode != want {
			t.Errorf("create %s: error %d, want %d", tp.Topic, tp.ErrorCode, want)
		}
	}
	if _, ok := b.blog.Topic("bob.created"); ok {
		t.Error("alice created bob.created")
	}
	// Fetching bob's topic as alice.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), alice, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"bob.theirs": {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	defer fcancel()
	fs := cons.PollFetches(fctx)
	denied := false
	fs.EachError(func(_ string, _ int32, err error) {
		if errors.Is(err, kerr.TopicAuthorizationFailed) {
			denied = true
		}
	})
	if !denied {
		t.Error("alice's fetch of bob.theirs was not refused with TOPIC_AUTHORIZATION_FAILED")
	}
}

// TestSASLReauthentication (KIP-368): with a 2s session lifetime, a kgo client keeps
// producing past several lifetimes on one connection by re-authenticating; a raw connection
// that does not re-authenticate is closed after expiry.
func TestSASLReauthentication(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, func(c *server.Config) { c.SessionLifetime = 2 * time.Second })
	addr := b.srv.ListenerAddr("sasl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 6; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "alice.reauth", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		time.Sleep(900 * time.Millisecond)
	}

	rc := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	rc.roundTrip(hs)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00alice-secret")
	resp := rc.roundTrip(au).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > 2000 {
		t.Fatalf("authenticate: error %d, session lifetime %dms", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	time.Sleep(2100 * time.Millisecond)
	rc.send(kmsg.NewPtrMetadataRequest())
	rc.expectClosed()
}

// TestSecurityConfluent: librdkafka (confluent-kafka-go) with SCRAM over SASL_PLAINTEXT and
// PLAIN over SASL_SSL, producing and consuming; and a wrong password refused.
func TestSecurityConfluent(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	for _, tc := range []struct {
		name, listener, protocol, mech string
	}{
		{"scram-plaintext", "sasl", "SASL_PLAINTEXT", "SCRAM-SHA-256"},
		{"scram512-ssl", "sasl_ssl", "SASL_SSL", "SCRAM-SHA-512"},
		{"plain-ssl", "sasl_ssl", "SASL_SSL", "PLAIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := kafka.ConfigMap{
				"bootstrap.servers": b.srv.ListenerAddr(tc.listener),
				"security.protocol": tc.protocol,
				"sasl.mechanism":    tc.mech,
				"sasl.username":     "alice",
				"sasl.password":     "alice-secret",
				"log_level":         3,
			}
			if strings.HasSuffix(tc.protocol, "SSL") {
				cfg["ssl.ca.location"] = ca.caFile
			}
			topic := "alice.confluent-" + tc.name
			p, err := kafka.NewProducer(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			dr := make(chan kafka.Event, 10)
			for i := 0; i < 10; i++ {
				if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte(fmt.Sprint(i))}, dr); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 10; i++ {
				select {
				case e := <-dr:
					if m := e.(*kafka.Message); m.TopicPartition.Error != nil {
						t.Fatalf("delivery: %v", m.TopicPartition.Error)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("no delivery report")
				}
			}
			b.waitHighWatermark(topic, 0, 10)
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		errs := make(chan error, 1)
		p, err := kafka.NewProducer(&kafka.ConfigMap{
			"bootstrap.servers": b.srv.ListenerAddr("sasl"), "security.protocol": "SASL_PLAINTEXT",
			"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "wrong", "log_level": 0,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		go func() {
			for e := range p.Events() {
				if ke, ok := e.(kafka.Error); ok && ke.Code() == kafka.ErrAuthentication {
					select {
					case errs <- ke:
					default:
					}
				}
			}
		}()
		select {
		case <-errs:
		case <-time.After(15 * time.Second):
			t.Fatal("librdkafka reported no authentication error for a wrong password")
		}
	})
}

// TestSecurityKcat: the kcat binary (its own librdkafka) with SCRAM over SASL_PLAINTEXT and
// PLAIN over SASL_SSL, and refused outside alice's prefix.
func TestSecurityKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not on PATH (Debian package kcat; scripts/setup.sh installs it)")
	}
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	for _, tc := range []struct {
		name, listener, protocol, mech string
	}{
		{"scram", "sasl", "SASL_PLAINTEXT", "SCRAM-SHA-256"},
		{"plain-ssl", "sasl_ssl", "SASL_SSL", "PLAIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			topic := "alice.kcat-" + tc.name
			args := []string{"-b", b.srv.ListenerAddr(tc.listener), "-X", "security.protocol=" + tc.protocol, "-X", "sasl.mechanism=" + tc.mech,
				"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
			if tc.protocol == "SASL_SSL" {
				args = append(args, "-X", "ssl.ca.location="+ca.caFile)
			}
			prod := exec.CommandContext(ctx, kcat, append(args, "-P", "-t", topic, "-p", "0")...)
			prod.Stdin = strings.NewReader("one\ntwo\nthree\n")
			if out, err := prod.CombinedOutput(); err != nil {
				t.Fatalf("kcat -P: %v\n%s", err, out)
			}
			b.waitHighWatermark(topic, 0, 3)
			cons := exec.CommandContext(ctx, kcat, append(args, "-C", "-t", topic, "-p", "0", "-e", "-f", `%s\n`)...)
			out, err := cons.Output()
			if err != nil || string(out) != "one\ntwo\nthree\n" {
				t.Fatalf("kcat -C: %v %q", err, out)
			}
		})
	}
	t.Run("outside prefix", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prod := exec.CommandContext(ctx, kcat, "-b", b.srv.ListenerAddr("sasl"), "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-P", "-t", "bob.kcat", "-p", "0")
		prod.Stdin = strings.NewReader("x\n")
		out, err := prod.CombinedOutput()
		if err == nil && !strings.Contains(strings.ToLower(string(out)), "authoriz") {
			t.Fatalf("kcat produced outside alice's prefix: %s", out)
		}
		if _, ok := b.blog.Topic("bob.kcat"); ok {
			t.Fatal("bob.kcat was created")
		}
	})
}

// TestGroupScopingOnMultiGroupAPIs: DescribeGroups, DeleteGroups and OffsetFetch v8 name
// several groups at once; groups outside the principal's prefixes are answered
// GROUP_AUTHORIZATION_FAILED and, for DeleteGroups, are not deleted.
func TestGroupScopingOnMultiGroupAPIs(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	addr := b.srv.ListenerAddr("sasl")
	alice := kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())
	bob := kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism())
	b.createTopic("bob.theirs", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	bcl, err := kgo.NewClient(kgo.SeedBrokers(addr), bob)
	if err != nil {
		t.Fatal(err)
	}
	defer bcl.Close()
	badm := kadm.NewClient(bcl)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "bob.theirs", Partition: 0, At: 7, LeaderEpoch: -1})
	if r, err := badm.CommitOffsets(ctx, "bob.g", offs); err != nil || r.Error() != nil {
		t.Fatalf("bob commits: %v / %v", err, r.Error())
	}

	acl, err := kgo.NewClient(kgo.SeedBrokers(addr), alice)
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"bob.g"}
	kdel, err := del.RequestWith(ctx, acl)
	if err != nil {
		t.Fatal(err)
	}
	if len(kdel.Groups) != 1 || kdel.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("alice deleting bob.g: %+v", kdel.Groups)
	}
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Groups = []string{"bob.g"}
	kdesc, err := desc.RequestWith(ctx, acl)
	if err != nil {
		t.Fatal(err)
	}
	if len(kdesc.Groups) != 1 || kdesc.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("alice describing bob.g: %+v", kdesc.Groups)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "bob.g"
	of.Groups = append(of.Groups, g)
	kof, err := acl.Broker(1).Request(ctx, of)
	if err != nil {
		t.Fatal(err)
	}
	if rg := kof.(*kmsg.OffsetFetchResponse).Groups; len(rg) != 1 || rg[0].ErrorCode != kerr.GroupAuthorizationFailed.Code || len(rg[0].Topics) != 0 {
		t.Errorf("alice fetching bob.g's offsets: %+v", rg)
	}
	// bob's offsets are untouched.
	got, err := badm.FetchOffsets(ctx, "bob.g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("bob.theirs", 0); !ok || o.At != 7 {
		t.Errorf("bob.g's offsets after alice's delete: %+v (found %v)", o, ok)
	}
}
