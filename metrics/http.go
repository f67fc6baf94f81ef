package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"inlet/httplimit"
)

// Handler serves, on its own mux (never http.DefaultServeMux, where importing net/http/pprof
// registers the profiles):
//
//	/metrics       the registry in Prometheus text format
//	/healthz       200 while the process serves HTTP at all
//	/readyz        200 once SetReady(true) (recovery done, listeners up), else 503; 503 also
//	               while a listener is not accepting (listeners.go), with a line naming it;
//	               while this node is not its bucket prefix's writer (lease.go), with a line
//	               saying why ("fenced: prefix taken by ..."); while it stands by for the
//	               prefix (role.go), "standby: " and who the writer is; while the remote tier's last
//	               pass failed, a line that says so follows "ready"
//	/debug/pprof/  net/http/pprof's handlers, only when withPprof (--pprof); 404 otherwise
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := m.standingBy(); why != "" {
			http.Error(w, "not ready\n"+why, http.StatusServiceUnavailable)
			return
		}
		if !m.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if down := m.Requests.listenersDown(); down != "" {
			http.Error(w, "not ready\n"+down, http.StatusServiceUnavailable)
			return
		}
		if why := m.leaseNotHeld(); why != "" {
			http.Error(w, "not ready\n"+why, http.StatusServiceUnavailable)
			return
		}
		msg := "ready\n"
		if behind := m.remoteBehind(); behind != "" {
			msg += behind + "\n"
		}
		_, _ = io.WriteString(w, msg)
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

// Serve listens on addr (host:port; port 0 picks one) and serves h until Close, with
// httplimit.Default's timeouts and connection cap; a profile's response may take as long as
// the profile was asked to run (Profiling).
func Serve(addr string, h http.Handler) (*Server, error) {
	lim := httplimit.Default
	lim.Longer = Profiling
	return ServeWith(addr, h, lim)
}

// ServeWith is Serve with the given limits.
func ServeWith(addr string, h http.Handler, lim httplimit.Limits) (*Server, error) {
	ln, err := lim.Listen(addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, hs: lim.Server(h), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.hs.Serve(ln)
	}()
	return s, nil
}

// Profiling is how long a request under /debug/pprof/ runs before it answers, parsed as
// net/http/pprof parses it: a CPU profile's seconds (whole; 30 by default), a trace's
// (fractional; 1 by default), a delta profile's (heap, allocs, block, mutex, goroutine: whole);
// at most a day.
func Profiling(r *http.Request) time.Duration {
	if !strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		return 0
	}
	q := r.URL.Query().Get("seconds")
	var sec float64
	switch r.URL.Path {
	case "/debug/pprof/trace":
		if f, err := strconv.ParseFloat(q, 64); err == nil && f > 0 {
			sec = f
		} else {
			sec = 1
		}
	case "/debug/pprof/profile":
		sec = 30
		fallthrough
	default:
		if n, err := strconv.ParseInt(q, 10, 64); err == nil && n > 0 {
			sec = float64(n)
		}
	}
	return time.Duration(min(sec, 24*3600) * float64(time.Second))
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
