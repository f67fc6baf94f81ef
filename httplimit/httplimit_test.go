package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"inlet/httplimit"
	"inlet/httplimit/limittest"
)

// serve runs h under lim on a loopback port until the test ends.
func serve(t *testing.T, lim httplimit.Limits, h http.Handler) string {
	t.Helper()
	ln, err := lim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := lim.Server(h)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
	})
	return ln.Addr().String()
}

var short = httplimit.Limits{
	ReadHeaderTimeout: 300 * time.Millisecond,
	ReadTimeout:       500 * time.Millisecond,
	WriteTimeout:      500 * time.Millisecond,
	IdleTimeout:       700 * time.Millisecond,
	MaxConns:          3,
}

// echo reads the whole body and answers its length; /slow waits a second first, /long too but
// it is given that second (Longer).
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.URL.Path == "/slow" || r.URL.Path == "/long" {
		time.Sleep(time.Second)
	}
	_, _ = io.WriteString(w, strings.Repeat("x", int(n)+1))
})

func TestIdleConnectionIsClosed(t *testing.T) {
	limittest.IdleIsClosed(t, serve(t, short, echo), "/", short.IdleTimeout)
}

func TestSlowBodyIsCut(t *testing.T) {
	limittest.SlowBodyIsCut(t, serve(t, short, echo), "/", short.ReadTimeout)
}

func TestConnectionsPastTheCapWait(t *testing.T) {
	limittest.ConnsPastTheCapWait(t, serve(t, short, echo), "/", short.MaxConns)
}

// TestWriteTimeoutAndLonger: a response that takes longer than WriteTimeout is cut (the client
// gets no response), unless Longer gives the request the time.
func TestWriteTimeoutAndLonger(t *testing.T) {
	lim := short
	lim.Longer = func(r *http.Request) time.Duration {
		if r.URL.Path == "/long" {
			return 2 * time.Second
		}
		return 0
	}
	addr := serve(t, lim, echo)
	c := &http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Get("http://" + addr + "/slow"); err == nil {
		resp.Body.Close()
		t.Fatalf("GET /slow past the write timeout: %s, want no response", resp.Status)
	}
	resp, err := c.Get("http://" + addr + "/long")
	if err != nil {
		t.Fatalf("GET /long, given the time by Longer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /long: %s", resp.Status)
	}
}
