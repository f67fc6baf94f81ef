// Package httplimit is what the node's HTTP listeners (the schema registry, package registry;
// the metrics and health checks, package metrics) allow one client: how long it may take to
// send a request, to take a response and to sit idle between requests, and how many
// connections are served at once. Without these, a client that opens connections and sends
// nothing more (or a body a byte a minute) holds a goroutine and a socket each, for ever.
//
// The connection cap is golang.org/x/net/netutil's LimitListener: past the cap, Accept waits
// until a served connection closes, so further connections wait in the kernel's listen backlog
// (they are neither refused nor served) rather than each taking a goroutine.
package httplimit

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Limits for one HTTP listener.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's line and headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, its body included (a slow body is cut).
	ReadTimeout time.Duration
	// WriteTimeout bounds a response, from the moment its handler starts (a client that does
	// not read it is cut).
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive connection.
	IdleTimeout time.Duration
	// MaxConns is the number of connections served at once; further ones wait to be accepted.
	MaxConns int
	// Longer, when set, is how much longer than WriteTimeout (and ReadTimeout) a request's
	// response may take: a CPU profile or trace streams for as long as it was asked to.
	Longer func(*http.Request) time.Duration
}

// Default is what the node's HTTP listeners use: a Prometheus scrape or a serializer's schema
// look-up takes milliseconds, and 256 connections is far more than scrapers and producers
// keep open at once.
var Default = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       30 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       2 * time.Minute,
	MaxConns:          256,
}

// Listen listens on addr (host:port; port 0 picks one) and caps the connections served at once.
func (l Limits) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return l.Listener(ln), nil
}

// Listener caps the connections of ln accepted and not yet closed at MaxConns.
func (l Limits) Listener(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, l.MaxConns)
}

// Server is an http.Server for h with these limits. Its WriteTimeout field stays zero: the
// write deadline is set per request as its handler starts, so that Longer can extend it (with
// http.Server.WriteTimeout set, net/http/pprof refuses any profile longer than the timeout).
func (l Limits) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           l.deadlines(h),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
	}
}

// deadlines sets each request's write deadline, and for a request Longer extends, the read
// deadline too: net/http cancels a request's context when a read on its connection fails,
// deadlines included, and a profile's handler stops when its context ends.
func (l Limits) deadlines(h http.Handler) http.Handler {
	if l.WriteTimeout <= 0 && l.Longer == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		var longer time.Duration
		if l.Longer != nil {
			longer = l.Longer(r)
		}
		if l.WriteTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(l.WriteTimeout + longer))
		}
		if longer > 0 && l.ReadTimeout > 0 {
			_ = rc.SetReadDeadline(time.Now().Add(l.ReadTimeout + longer))
		}
		h.ServeHTTP(w, r)
	})
}
