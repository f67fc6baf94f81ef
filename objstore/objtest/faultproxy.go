package objtest

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FaultProxy is a reverse proxy for S3 traffic on a loopback port, in front of a server such as
// versitygw, that injects the faults a bucket shows in production, switchable while it runs
// (Set): added latency, 5xx answers (503 SlowDown, 500 InternalError), connections cut in the
// middle of a request or its body, PUTs that land with their reply lost, and an outage (every
// connection reset). A client signs its requests for the proxy's host; the proxy forwards
// them with that Host header unchanged, so the server checks the same signature.
//
// A connection is cut with a TCP reset (SO_LINGER 0), so the client sees "connection reset by
// peer" at once rather than a clean end of stream.
type FaultProxy struct {
	// URL is the proxy's base URL ("http://127.0.0.1:PORT"): the endpoint to give clients.
	URL string

	target *url.URL
	ln     net.Listener
	srv    *http.Server
	fwd    *http.Transport

	mu     sync.Mutex
	faults Faults
	rnd    *rand.Rand
	conns  map[net.Conn]bool // accepted and not closed (hijacked ones included)

	stats FaultStats
}

// Faults is what the proxy does to the requests that arrive while it is set. The zero value
// forwards everything untouched.
type Faults struct {
	// Latency is added before each request is forwarded (or failed).
	Latency time.Duration
	// Fail is the share of requests (0 to 1) answered 503 SlowDown or 500 InternalError
	// (alternately) without being forwarded.
	Fail float64
	// Cut is the share of requests whose connection is cut before they are forwarded: after
	// half of the body has been read (mid-body), or at once for a request without one.
	Cut float64
	// LoseReplies is the share of PUTs that are forwarded and answered 2xx by the server (they
	// landed) whose reply is replaced by a cut connection: the client cannot tell the write
	// happened. Replies other than 2xx (a 412 to a retried If-None-Match PUT) pass.
	LoseReplies float64
	// Down resets every connection as it is accepted and cuts those open when set: the bucket
	// is unreachable.
	Down bool
}

// FaultStats counts what the proxy did; read them with Load.
type FaultStats struct {
	Requests    atomic.Int64 // requests read (not those of connections reset while Down)
	Forwarded   atomic.Int64 // requests forwarded and answered by the server
	Failed      atomic.Int64 // answered 5xx by the proxy (Fail)
	Cut         atomic.Int64 // connections cut mid-request (Cut)
	LostReplies atomic.Int64 // PUTs that landed and whose reply was cut (LoseReplies)
	Refused     atomic.Int64 // connections reset at accept or cut at Set while Down
}

// StartFaultProxy starts a proxy in front of target (a server's base URL, such as
// Server.Endpoint) on a free loopback port, forwarding untouched until Set; it stops when t
// ends. Its random choices come from seed, so a failing run can be repeated.
func StartFaultProxy(t testing.TB, target string, seed uint64) *FaultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("objtest: fault proxy target %q: %v", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{
		URL:    "http://" + ln.Addr().String(),
		target: u,
		ln:     ln,
		fwd: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			DisableCompression:  true, // pass bodies and Accept-Encoding as the client sent them
		},
		rnd:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns: map[net.Conn]bool{},
	}
	p.srv = &http.Server{Handler: p, ConnState: p.connState, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.srv.Serve(&faultListener{Listener: ln, p: p})
	}()
	t.Cleanup(func() {
		_ = p.srv.Close() // closes the listener and every connection it still tracks
		p.cutAll()        // and the hijacked ones
		<-done
		p.fwd.CloseIdleConnections()
	})
	return p
}

// Set switches the faults for the requests that arrive from now on; setting Down also cuts
// every open connection.
func (p *FaultProxy) Set(f Faults) {
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
	if f.Down {
		p.stats.Refused.Add(int64(p.cutAll()))
	}
}

// Stats returns the proxy's counters.
func (p *FaultProxy) Stats() *FaultStats { return &p.stats }

// faultListener resets the connections it accepts while the proxy is Down.
type faultListener struct {
	net.Listener
	p *FaultProxy
}

func (l *faultListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.p.mu.Lock()
		down := l.p.faults.Down
		if !down {
			l.p.conns[c] = true
		}
		l.p.mu.Unlock()
		if !down {
			return c, nil
		}
		l.p.stats.Refused.Add(1)
		reset(c)
	}
}

func (p *FaultProxy) connState(c net.Conn, s http.ConnState) {
	if s == http.StateClosed {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}
}

// cutAll resets every connection the proxy holds and returns how many.
func (p *FaultProxy) cutAll() int {
	p.mu.Lock()
	cs := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	clear(p.conns)
	p.mu.Unlock()
	for _, c := range cs {
		reset(c)
	}
	return len(cs)
}

// reset closes c with a TCP reset rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// draw reports whether an event of probability share happens.
func (p *FaultProxy) draw(share float64) bool {
	if share <= 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rnd.Float64() < share
}

// hopHeaders are the hop-by-hop headers a proxy does not forward (RFC 9110, 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.stats.Requests.Add(1)
	p.mu.Lock()
	f := p.faults
	p.mu.Unlock()
	if f.Latency > 0 {
		select {
		case <-time.After(f.Latency):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case f.Down:
		// Set Down while this request waited: its connection is cut (or about to be).
		p.cut(w)
		return
	case p.draw(f.Cut):
		if r.ContentLength > 0 {
			_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		}
		p.stats.Cut.Add(1)
		p.cut(w)
		return
	case p.draw(f.Fail):
		n := p.stats.Failed.Add(1)
		code, status, msg := "SlowDown", http.StatusServiceUnavailable, "Please reduce your request rate."
		if n%2 == 0 {
			code, status, msg = "InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>"+code+"</Code><Message>"+msg+"</Message><RequestId>faultproxy</RequestId></Error>")
		return
	}

	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.Scheme+"://"+p.target.Host+r.RequestURI, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Host = r.Host // the client signed the proxy's host
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = http.NoBody
	}
	resp, err := p.fwd.RoundTrip(out)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	p.stats.Forwarded.Add(1)
	if r.Method == http.MethodPut && resp.StatusCode/100 == 2 && p.draw(f.LoseReplies) {
		_, _ = io.Copy(io.Discard, resp.Body)
		p.stats.LostReplies.Add(1)
		p.cut(w)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// cut resets the connection of w's request without an answer.
func (p *FaultProxy) cut(w http.ResponseWriter) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return // the connection is gone already (cut by Set or by the proxy's end)
	}
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	reset(c)
}
