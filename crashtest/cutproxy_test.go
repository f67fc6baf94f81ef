package crashtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards loopback TCP connections to a node's listener. cut closes every
// connection it carries, both ends, and refuses new ones until setTarget names the next node,
// so that nothing the old node sends from then on reaches a client: what a power loss does to
// a node's replies, which an in-process node, drained after its file systems are cloned, would
// otherwise still deliver.
type cutProxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string // the node's address, set again when a new node starts
	down   bool   // cut, and no new node yet: connections are refused
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go p.accept()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) setTarget(addr string) {
	p.mu.Lock()
	p.target, p.down = addr, false
	p.mu.Unlock()
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

// forward copies c to a new connection to the target and back, until either side ends or
// the proxy cuts them.
func (p *cutProxy) forward(c net.Conn) {
	p.mu.Lock()
	target, down := p.target, p.down
	p.mu.Unlock()
	if down {
		c.Close()
		return
	}
	n, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down || p.target != target {
		p.mu.Unlock()
		c.Close()
		n.Close()
		return
	}
	p.conns[c], p.conns[n] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(n, c)
	go pipe(c, n)
	<-done
	c.Close()
	n.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, n)
	p.mu.Unlock()
}

// cut closes every connection the proxy carries and refuses new ones until setTarget.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}
