package e2e

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"inlet/server"
)

// TestFailedAuthenticationIsDelayedAndGrows: a failed SASL authentication is answered (and the
// connection closed) only after connection.failed.authentication.delay.ms, and the delay
// doubles with each further failure from the same address, so guessing passwords is slow.
// A success from the address starts it over.
func TestFailedAuthenticationIsDelayedAndGrows(t *testing.T) {
	// The delay is the yardstick for "at once" too (a success must be answered in less than
	// it), so it is long enough that a busy 2-core machine running other tests beside this one
	// does not stretch a plain SASL round trip past it.
	const delay = 400 * time.Millisecond
	b := secureBroker(t, newTestCA(t), func(c *server.Config) { c.FailedAuthenticationDelay = delay })
	addr := b.srv.ListenerAddr("sasl")
	attempt := func(pw string) (int16, time.Duration) {
		rc := dialRaw(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		if r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake: %d", r.ErrorCode)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, []byte("\x00alice\x00"+pw)
		began := time.Now()
		resp := rc.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
		took := time.Since(began)
		if resp.ErrorCode != 0 {
			// Nothing more is served on it: a request after the failure is not answered.
			rc.send(kmsg.NewPtrMetadataRequest())
			rc.expectClosed()
		}
		return resp.ErrorCode, took
	}
	for i, want := range []time.Duration{delay, 2 * delay, 4 * delay} {
		code, took := attempt("wrong")
		if code != 58 {
			t.Fatalf("failure %d: error %d, want 58", i+1, code)
		}
		if took < want {
			t.Errorf("failure %d answered after %v, want at least %v", i+1, took, want)
		}
	}
	if code, took := attempt("alice-secret"); code != 0 || took >= delay {
		t.Errorf("right password: error %d after %v; want 0 at once", code, took)
	}
	if _, took := attempt("wrong"); took < delay || took >= 2*delay {
		t.Errorf("failure after a success answered after %v, want the first delay (%v) again", took, delay)
	}
}

// TestFramesBeforeAuthenticationAreCapped: on a SASL listener a frame larger than
// sasl.server.max.receive.size (512 KiB) before authentication closes the connection at its
// length prefix (nothing is allocated for it); after authentication the limit is
// socket.request.max.bytes again. Both transports: gnet's loops and TLS.
func TestFramesBeforeAuthenticationAreCapped(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, nil)
	rc := dialRaw(t, b.srv.ListenerAddr("sasl"))
	rc.alive()
	rc.write(binary.BigEndian.AppendUint32(nil, 512<<10+1))
	rc.expectClosed()

	rc = dialRaw(t, b.srv.ListenerAddr("sasl"))
	rc.write(binary.BigEndian.AppendUint32(nil, 512<<10)) // at the limit: read, then refused as unauthenticated
	rc.write(append([]byte{0, 3, 0, 9, 0, 0, 0, 1}, make([]byte, 512<<10-8)...))
	rc.expectClosed()

	// The same over TLS (a goroutine per connection).
	tc, err := tls.Dial("tcp", b.srv.ListenerAddr("sasl_ssl"), ca.clientTLS(false))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	trc := &rawConn{t: t, c: tc, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("inlet-e2e"))}
	trc.alive()
	trc.write(binary.BigEndian.AppendUint32(nil, 512<<10+1))
	trc.expectClosed()

	// Authenticated, a 600 KiB produce is served.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.srv.ListenerAddr("sasl")), kgo.AllowAutoTopicCreation(),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "alice.big", Value: make([]byte, 600<<10)}).FirstErr(); err != nil {
		t.Fatalf("authenticated 600 KiB produce: %v", err)
	}
}

// TestIdleTimeoutClosesStalledFrames: connections.max.idle.ms counts a connection that stopped
// in the middle of a frame as idle (nothing it sent is outstanding), so a client cannot pin
// in-flight budget by stalling; its frame is dropped and the budget given back. A connection
// waiting for a reply is not idle.
func TestIdleTimeoutClosesStalledFrames(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.ConnectionsMaxIdle = 300 * time.Millisecond
		c.InflightBudget = 1 << 20
		c.Workers = 1
	})
	stalled := dialRaw(t, b.addr)
	stalled.write(binary.BigEndian.AppendUint32(nil, 900<<10))
	stalled.write(append([]byte{0, 18, 0, 3, 0, 0, 0, 1}, make([]byte, 600<<10)...))
	began := time.Now()
	stalled.expectClosed()
	if took := time.Since(began); took < 250*time.Millisecond {
		t.Errorf("stalled connection closed after %v, before connections.max.idle.ms", took)
	}
	// The stalled frame's budget is back: a 900 KiB frame (it needs most of the budget) from
	// a new connection is served, over a long poll that outlasts the idle time.
	rc := dialRaw(t, b.addr)
	s := plainBatch(1, 1000, "after")
	s.records[0].value = make([]byte, 800<<10)
	if p := rc.produceOne(9, "idle", 0, s.encode()); p.ErrorCode != 0 {
		t.Fatalf("produce after the stalled connection: error %d", p.ErrorCode)
	}
	f := kmsg.NewPtrFetchRequest()
	f.Version, f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 11, 800, 10<<20, 10<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "idle"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	rc.roundTrip(f) // 800 ms waiting for bytes that never come: not idle
	rc.alive()
}

// TestTLSHandshakesCountAgainstConnectionLimits: a TLS connection counts against
// max.connections.per.ip from the moment it is accepted, so connections that never finish
// their handshake cannot go around the limit.
func TestTLSHandshakesCountAgainstConnectionLimits(t *testing.T) {
	ca := newTestCA(t)
	b := secureBroker(t, ca, func(c *server.Config) { c.MaxConnectionsPerIP = 2 })
	addr := b.srv.ListenerAddr("sasl_ssl")
	silent := dialRaw(t, addr) // TCP only, no handshake; a second one below
	dialRaw(t, addr)
	time.Sleep(100 * time.Millisecond)
	dialRaw(t, addr).expectClosed()
	silent.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tc, err := tls.Dial("tcp", addr, ca.clientTLS(false))
		if err == nil {
			tc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection's place was not given back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
