package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"inlet/conn"
	"inlet/server"
)

// TestEachListenerAdvertisesItsOwnAddress: Metadata, FindCoordinator (single and batched)
// and DescribeCluster name the address of the listener the request came in on. Behind an
// SNI-routing proxy the TLS listener advertises <node>.<domain>; a client told the plain
// listener's address (or none) there would leave the proxy.
func TestEachListenerAdvertisesItsOwnAddress(t *testing.T) {
	ca := newTestCA(t)
	b := startBroker(t, func(c *server.Config) {
		c.Listeners = []conn.Listener{
			{Name: "plain", Address: "127.0.0.1:0", Advertise: "plain.inlet.test:19092", Protocol: "PLAINTEXT"},
			{Name: "tls", Address: "127.0.0.1:0", Advertise: "node1.inlet.test:19093", Protocol: "SSL", TLS: ca.serverTLS()},
		}
	})
	for _, l := range []struct {
		name, host string
		port       int32
		opts       []kgo.Opt
	}{
		{"plain", "plain.inlet.test", 19092, nil},
		{"tls", "node1.inlet.test", 19093, []kgo.Opt{kgo.DialTLSConfig(ca.clientTLS(false))}},
	} {
		// kgo sends each request at the highest version both sides know: a client capped at
		// Kafka 2.8 asks FindCoordinator v3 (one key, the answer at the top level).
		var seeds [2]*kgo.Broker
		for i, opts := range [][]kgo.Opt{nil, {kgo.MaxVersions(kversion.V2_8_0())}} {
			cl, err := kgo.NewClient(append(append(opts, l.opts...), kgo.SeedBrokers(b.srv.ListenerAddr(l.name)))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			seeds[i] = cl.SeedBrokers()[0] // the seed connection only: the advertised names resolve nowhere
		}
		seed := seeds[0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		check := func(what, host string, port int32) {
			t.Helper()
			if host != l.host || port != l.port {
				t.Errorf("%s listener: %s names %s:%d, want %s:%d", l.name, what, host, port, l.host, l.port)
			}
		}

		mresp, err := seed.Request(ctx, kmsg.NewPtrMetadataRequest())
		if err != nil {
			t.Fatalf("%s: Metadata: %v", l.name, err)
		}
		mb := mresp.(*kmsg.MetadataResponse).Brokers
		if len(mb) != 1 {
			t.Fatalf("%s: Metadata lists %d brokers", l.name, len(mb))
		}
		check("Metadata", mb[0].Host, mb[0].Port)

		for _, br := range seeds {
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
			r, err := br.Request(ctx, fc)
			if err != nil {
				t.Fatalf("%s: FindCoordinator: %v", l.name, err)
			}
			resp := r.(*kmsg.FindCoordinatorResponse)
			if resp.Version < 4 {
				check("FindCoordinator v3", resp.Host, resp.Port)
			} else if len(resp.Coordinators) != 1 {
				t.Errorf("%s: FindCoordinator v%d: %d coordinators", l.name, resp.Version, len(resp.Coordinators))
			} else {
				check("FindCoordinator v4", resp.Coordinators[0].Host, resp.Coordinators[0].Port)
			}
		}

		r, err := seed.Request(ctx, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			t.Fatalf("%s: DescribeCluster: %v", l.name, err)
		}
		if bs := r.(*kmsg.DescribeClusterResponse).Brokers; len(bs) != 1 {
			t.Errorf("%s: DescribeCluster lists %d brokers", l.name, len(bs))
		} else {
			check("DescribeCluster", bs[0].Host, bs[0].Port)
		}
	}
}
