package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"inlet/conn"
	"inlet/server"
	"inlet/server/standby"
)

// A --standby node with --cluster-nodes answers Kafka on its listeners while it stands by
// (package server/standby): Metadata from the writer it finds by asking the other nodes, every
// other request refused with a retriable error that sends the client to the writer. The front
// closes its listeners and connections as soon as the node holds the prefix, before the
// server binds the same addresses. Without --cluster-nodes the standby listens on nothing, as
// it cannot tell clients where the writer is.
//
// A writer that another node fenced (it took the prefix: the lease's Fenced) and that runs
// with --standby re-executes itself with the same arguments at once (main.go says why it
// neither drains nor closes its log): it comes back as a standby waiting on the new writer,
// its data directory emptied at its next takeover (writer.epoch).

// frontConfig is the standby front's configuration; nil without --cluster-nodes.
// protocols is group.coordinator.rebalance.protocols, for ApiVersions' features.
func frontConfig(logger *slog.Logger, o *options, listeners []conn.Listener, nodes []server.Node, maxConns int, protocols []string) *standby.Config {
	if len(nodes) == 0 {
		return nil
	}
	if len(listeners) == 0 {
		listeners = []conn.Listener{{Name: "PLAINTEXT", Address: *o.listen, Advertise: *o.advertise, Protocol: "PLAINTEXT"}}
	}
	if p := strings.ToUpper(listeners[0].Protocol); (p != "" && p != "PLAINTEXT") || listeners[0].Anonymous != nil {
		logger.Warn("--cluster-nodes: a standby asks the other nodes for the writer at their first listeners as an unrestricted client without SASL or TLS, and this first listener is not one", "listener", listeners[0].Name, "protocol", p)
	}
	idle := msFlag(*o.connectionsMaxIdleMs)
	if idle <= 0 || idle > standby.DefaultIdleTimeout {
		idle = standby.DefaultIdleTimeout
	}
	if maxConns <= 0 || maxConns > standby.DefaultMaxConnections {
		maxConns = standby.DefaultMaxConnections
	}
	fc := &standby.Config{Listeners: listeners, NodeID: int32(*o.nodeID), Nodes: nodes,
		MaxRequestBytes: int(mustSize("max-request-bytes", *o.maxRequest)), MaxConnections: maxConns, IdleTimeout: idle, Logger: logger}
	fc.SupportedFeatures, fc.FinalizedFeatures = server.Features(protocols)
	return fc
}

// startFront starts the front (nothing without a config) and tells /readyz who the writer
// is; the function returned closes it.
func startFront(logger *slog.Logger, fc *standby.Config, mon *monitor) func() {
	if fc == nil {
		mon.standingBy(func() string { return "waiting for the writer to stop (no --cluster-nodes: no writer is asked)" })
		return func() {}
	}
	f, err := standby.Start(*fc)
	if err != nil {
		logger.Error("standby: answering on the listeners", "err", err)
		os.Exit(1)
	}
	logger.Info("standby: answering clients, sending them to the writer", "addrs", f.Addrs())
	mon.standingBy(func() string {
		if w, ok := f.LookForWriter(time.Second); ok {
			return fmt.Sprintf("the writer is node %d at %s:%d", w.ID, w.Host, w.Port)
		}
		return "no writer answers"
	})
	return func() {
		f.Close()
		mon.standingBy(func() string { return "took the bucket prefix; starting" })
	}
}

// fencedWhileStandby is closed once another node took the prefix from this writer, when it
// runs with --standby (nil, never closed, otherwise: a fenced node without it answers every
// produce NOT_LEADER_OR_FOLLOWER until restarted by hand).
func fencedWhileStandby(rs *remoteSettings) <-chan struct{} {
	if rs == nil || !rs.standby {
		return nil
	}
	if l := rs.lease.p.Load(); l != nil {
		return l.Fenced()
	}
	return nil
}

// restartAsStandby replaces the process with a new run of the same binary (/proc/self/exe,
// which names it even if the file was replaced since) and arguments, once everything is
// closed; it does not return.
func restartAsStandby(logger *slog.Logger) {
	logger.Warn("fenced: starting again as a standby", "args", os.Args[1:])
	err := syscall.Exec("/proc/self/exe", os.Args, os.Environ())
	logger.Error("fenced: re-executing", "err", err)
	os.Exit(1)
}
