package transport

import (
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// openFiles counts this process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// lowerFileLimit sets this process's soft RLIMIT_NOFILE to what is open now plus room, and
// puts it back when the test ends. The tests of this package do not run in parallel, so
// nothing else of the process opens descriptors meanwhile.
func lowerFileLimit(t *testing.T, room int) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(openFiles(t) + room)
	if lim.Cur > old.Cur {
		t.Skipf("soft limit %d already under %d", old.Cur, lim.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// TestAcceptSurvivesDescriptorExhaustion: with the process out of descriptors, accepting fails
// (EMFILE) on both back-ends; the listener goes on (gnet's own acceptor would shut its engine
// down, with every connection on it), a connection opened before the flood is still served
// during it, the listener says it is not serving while accepting fails, and once the flood's
// connections are closed a new connection is served within a second and the listener says it
// is serving again without a client having to connect first.
func TestAcceptSurvivesDescriptorExhaustion(t *testing.T) {
	for _, backend := range []string{"gnet", "stream"} {
		t.Run(backend, func(t *testing.T) {
			var mu sync.Mutex
			var events []error
			tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8, ListenerEvent: func(_ string, err error) {
				mu.Lock()
				events = append(events, err)
				mu.Unlock()
			}})
			e := &echo{}
			var addr string
			if backend == "gnet" {
				g, err := tr.ServeGnet(e, GnetConfig{Name: "g", Addr: "127.0.0.1:0", Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Stop()
				addr = g.Addr().String()
			} else {
				nl, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				tr.ServeStream(e, nl, StreamConfig{Name: "s"})
				defer tr.CloseStreams()
				addr = nl.Addr().String()
			}
			bystander, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer bystander.Close()
			echoes(t, bystander)

			// Client and server share the process's limit: each connection takes a
			// descriptor on each side, so the server runs out after about room/2 of them.
			lowerFileLimit(t, 40)
			var flood []net.Conn
			for range 200 {
				c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
				if err != nil {
					continue // out of descriptors on this side too, or the backlog is full
				}
				flood = append(flood, c)
			}
			deadline := time.Now().Add(5 * time.Second)
			for listenerServing(tr) {
				if time.Now().After(deadline) {
					t.Fatalf("the listener never ran out of descriptors (%d flood connections)", len(flood))
				}
				time.Sleep(5 * time.Millisecond)
			}
			echoes(t, bystander) // the existing connection is served during the exhaustion

			for _, c := range flood {
				c.Close()
			}
			// Descriptors free again: the listener notices by itself, within its longest backoff
			// (0.4 s). The bounds here are 3 s, not the 1 s the binary is held to
			// (crashtest/descriptors_test.go): this test also runs under the race detector on a
			// busy 2-core machine.
			deadline = time.Now().Add(3 * time.Second)
			for !listenerServing(tr) {
				if time.Now().After(deadline) {
					t.Fatalf("listener still not serving 3 s after the flood closed: %+v", tr.Listeners())
				}
				time.Sleep(5 * time.Millisecond)
			}
			began := time.Now()
			nc, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = nc.SetDeadline(time.Now().Add(time.Second))
			echoes(t, nc)
			nc.Close()
			if d := time.Since(began); d > 3*time.Second {
				t.Fatalf("a new connection took %v to be served after the flood", d)
			}
			echoes(t, bystander)
			st := tr.Listeners()[0]
			if st.AcceptErrors == 0 || st.LastError == "" {
				t.Fatalf("accept errors not counted: %+v", st)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(events) < 3 || events[0] != nil || events[1] == nil || events[len(events)-1] != nil {
				t.Fatalf("listener events %v: want started, an error, ..., serving again", events)
			}
		})
	}
}

func listenerServing(tr *Transport) bool {
	for _, l := range tr.Listeners() {
		if !l.Serving {
			return false
		}
	}
	return true
}

// TestConnectionCreationRateWaits: with max.connection.creation.rate at 20/s, 30 connections
// opened at once are all served, the last ones only after the bucket (20, one second's worth)
// has refilled: the acceptor waits, it does not refuse.
func TestConnectionCreationRateWaits(t *testing.T) {
	var throttled time.Duration
	var mu sync.Mutex
	tr := New(Config{Budget: 64 << 20, MaxFrame: 1 << 20, MinFrame: 8, MaxConnectionRate: 20,
		AcceptThrottled: func(d time.Duration) { mu.Lock(); throttled += d; mu.Unlock() }})
	e := &echo{}
	g, err := tr.ServeGnet(e, GnetConfig{Addr: "127.0.0.1:0", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	began := time.Now()
	var conns []net.Conn
	for range 30 {
		c, err := net.Dial("tcp", g.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.opened() < 30 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 30 connections opened", e.opened())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(began); d < 400*time.Millisecond {
		t.Fatalf("30 connections accepted in %v at 20/s with a burst of 20: want at least 0.4 s", d)
	}
	mu.Lock()
	if throttled == 0 {
		t.Error("no throttle reported")
	}
	mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
