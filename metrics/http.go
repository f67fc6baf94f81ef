package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves, on its own mux (never http.DefaultServeMux, where importing net/http/pprof
// registers the profiles):
//
//	/metrics       the registry in Prometheus text format
//	/healthz       200 while the process serves HTTP at all
//	/readyz        200 once SetReady(true) (recovery done, listeners up), else 503
//	/debug/pprof/  net/http/pprof's handlers, only when withPprof (--pprof); 404 otherwise
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // and every named profile under it
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Server is the HTTP listener of the metrics and health checks.
type Server struct {
	ln   net.Listener
	hs   *http.Server
	done chan struct{}
}

// Serve listens on addr (host:port; port 0 picks one) and serves h until Close.
func Serve(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// No write timeout: a CPU profile streams for as long as it was asked to.
	s := &Server{ln: ln, hs: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.hs.Serve(ln)
	}()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener and waits for requests in progress until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	err := s.hs.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = s.hs.Close()
	}
	<-s.done
	return err
}
