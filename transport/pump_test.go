package transport

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sizedReplies answers frame i (its first 4 bytes) with a reply of sizes[i%len(sizes)] bytes
// of body(i, n): at once, in order (inOrder), or from a goroutine of its own, the later ones
// of each len(sizes) sooner, so a group's replies become writable together. It keeps the
// connection to watch its output.
type sizedReplies struct {
	echo
	sizes   []int
	inOrder bool
	mu      sync.Mutex
	conn    *Conn
}

func (e *sizedReplies) Frame(r *Request) bool {
	e.mu.Lock()
	e.conn = r.Conn()
	e.mu.Unlock()
	i := int(binary.BigEndian.Uint32(r.Bytes()))
	answer := func() {
		n := e.sizes[i%len(e.sizes)]
		o := GetOut(n + 4)
		o.B = appendFrame(o.B, body(i, n))
		r.Reply(o)
		r.Release()
	}
	if e.inOrder {
		answer()
		return true
	}
	go func() {
		time.Sleep(time.Duration(len(e.sizes)-i%len(e.sizes)) * time.Millisecond)
		answer()
	}()
	return true
}

// askSized serves e on a gnet loop of a fresh transport (stopped at the test's end) and sends it
// frames 0 to n-1 over one connection.
func askSized(t *testing.T, e *sizedReplies, n int) (*Transport, net.Conn) {
	t.Helper()
	tr := New(Config{Budget: 256 << 20, MaxFrame: 1 << 20, MinFrame: 4})
	g, err := tr.ServeGnet(e, GnetConfig{Addr: "127.0.0.1:0", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Stop() })
	nc, err := net.Dial("tcp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := nc.Write(appendFrame(nil, binary.BigEndian.AppendUint32(nil, uint32(i)))); err != nil {
			t.Fatal(err)
		}
	}
	return tr, nc
}

// TestGnetLargeRepliesArePumped: replies larger than a chunk, pipelined with small ones, reach
// a client that reads slowly whole and in order, while gnet's outbound buffer holds a few
// chunks of them at most, not the rest of a 24 MiB reply; once read, the budget holds nothing.
// Replies written as they come (small ones before a pumped one, and behind it while its
// backlog waits), and groups of them that become writable together.
func TestGnetLargeRepliesArePumped(t *testing.T) {
	t.Run("in order", func(t *testing.T) {
		readPumped(t, &sizedReplies{sizes: []int{100, 24 << 20, 50, 100, 3<<20 + 7, 50}, inOrder: true}, 12)
	})
	t.Run("together", func(t *testing.T) {
		readPumped(t, &sizedReplies{sizes: []int{24 << 20, 100, 3<<20 + 7, 50, pumpChunk, pumpChunk + 1}}, 12)
	})
}

// readPumped asks e for frames replies and reads them slowly (the 24 MiB one), checking
// their order and bytes and what gnet's outbound buffer held.
func readPumped(t *testing.T, e *sizedReplies, frames int) {
	sizes := e.sizes
	tr, nc := askSized(t, e, frames)
	defer nc.Close()
	var most atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
			e.mu.Lock()
			c := e.conn
			e.mu.Unlock()
			if c != nil {
				if n := c.sockOut.Load(); n > most.Load() {
					most.Store(n)
				}
			}
		}
	}()
	_ = nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 64<<10)
	for i := range frames {
		var hdr [4]byte
		if _, err := io.ReadFull(nc, hdr[:]); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		want := body(i, n)
		if n != sizes[i%len(sizes)] {
			t.Fatalf("reply %d has %d bytes, want %d (out of order?)", i, n, sizes[i%len(sizes)])
		}
		for got := 0; got < n; {
			m, err := nc.Read(buf[:min(len(buf), n-got)])
			if err != nil {
				t.Fatalf("reply %d at %d: %v", i, got, err)
			}
			for j := range m {
				if buf[j] != want[got+j] {
					t.Fatalf("reply %d: byte %d is %d, want %d", i, got+j, buf[j], want[got+j])
				}
			}
			got += m
			if n == 24<<20 && i < len(sizes) {
				time.Sleep(100 * time.Microsecond) // a consumer slower than the broker
			}
		}
	}
	if m := most.Load(); m > 3*pumpChunk {
		t.Errorf("gnet's outbound buffer held %d bytes at most, want three chunks (%d) at most", m, 3*pumpChunk)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.BudgetHeld() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("budget holds %d after the client read every reply", tr.BudgetHeld())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGnetPumpedReplyOfAClosedConnectionIsDropped: a client that closes partway through a
// pumped reply leaves nothing held: the backlog's replies give their budget back.
func TestGnetPumpedReplyOfAClosedConnectionIsDropped(t *testing.T) {
	tr, nc := askSized(t, &sizedReplies{sizes: []int{24 << 20, 3 << 20}}, 4)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for tr.BudgetHeld() != 0 || tr.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("budget holds %d, %d requests in flight, after the client closed mid-reply", tr.BudgetHeld(), tr.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
