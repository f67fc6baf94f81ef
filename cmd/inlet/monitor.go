package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"inlet/batchlog"
	"inlet/metrics"
	"inlet/server"
	"inlet/tier"
)

// monitor is --metrics-listen: Prometheus metrics, /healthz and /readyz (and pprof with
// --pprof) on their own HTTP listener. It starts before the log is opened, so that while
// recovery runs /healthz answers and /readyz says 503. nil without --metrics-listen; every
// method of a nil monitor does nothing.
type monitor struct {
	m  *metrics.Metrics
	hs *metrics.Server
}

func startMonitor(logger *slog.Logger, addr string, pprof bool) *monitor {
	if addr == "" {
		if pprof {
			usage("--pprof serves on the --metrics-listen listener: set that too")
		}
		return nil
	}
	var keys []int16
	for _, k := range server.SupportedAPIs() {
		keys = append(keys, k.ApiKey)
	}
	rev, _, _, _ := buildInfo()
	m := metrics.New(keys, version, rev)
	hs, err := metrics.Serve(addr, m.Handler(pprof))
	if err != nil {
		logger.Error("metrics listener", "err", err)
		os.Exit(1)
	}
	logger.Info("metrics listening", "addr", hs.Addr(), "pprof", pprof)
	return &monitor{m: m, hs: hs}
}

// observer is the batch log's Options.Observer (an untyped nil without metrics).
func (mo *monitor) observer() batchlog.Observer {
	if mo == nil {
		return nil
	}
	return mo.m.Commits
}

// requests is the server's Config.Metrics.
func (mo *monitor) requests() *metrics.Requests {
	if mo == nil {
		return nil
	}
	return mo.m.Requests
}

// ready adds the state of the log, the server and the remote tier to what is scraped and turns /readyz to 200:
// recovery is done and every listener is up.
func (mo *monitor) ready(blog *batchlog.Log, srv *server.Server, remote *tier.Tier) {
	if mo == nil {
		return
	}
	mo.m.Watch(blog, srv)
	if remote != nil {
		mo.m.WatchRemote(remote)
	}
	mo.m.SetReady(true)
}

// disklessObserver gives the diskless committer, made by openNode, the commit latency
// histogram (nothing without a bucket).
func (mo *monitor) disklessObserver(rs *remoteSettings) {
	if mo != nil && rs != nil {
		rs.diskless.Observer = mo.m.DisklessObserver()
	}
}

// watchDiskless adds the diskless commit log's counters to what is scraped.
func (mo *monitor) watchDiskless(rs *remoteSettings) {
	if mo != nil && rs != nil && rs.committer != nil {
		mo.m.WatchDiskless(rs.committer)
	}
}

// standingBy tells /readyz that the node stands by, and who the writer is.
func (mo *monitor) standingBy(writer func() string) {
	if mo != nil {
		mo.m.StandingBy(writer)
	}
}

// tookOver counts a standby's takeover, once it serves (nothing for a node that did not
// stand by).
func (mo *monitor) tookOver(logger *slog.Logger, rs *remoteSettings) {
	if rs == nil || rs.takenAt.IsZero() {
		return
	}
	d := time.Since(rs.takenAt)
	logger.Info("standby: took over and serving", "took", d)
	if mo != nil {
		mo.m.TookOver(d)
	}
}

// draining turns /readyz back to 503: new connections are refused from now on.
func (mo *monitor) draining() {
	if mo != nil {
		mo.m.SetReady(false)
	}
}

// stop closes the listener; called before the log closes, since a scrape reads the log.
func (mo *monitor) stop(ctx context.Context) {
	if mo != nil {
		_ = mo.hs.Close(ctx)
	}
}
