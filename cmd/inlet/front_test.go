package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"inlet/server"
	"inlet/server/standby"
)

// TestFrontConfig: no front without --cluster-nodes; with it, the --listen listener when the
// config file has none, the connection bound and idle timeout no looser than the front's
// own, and the node's frame bound.
func TestFrontConfig(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, o, err := parseFlags([]string{"--listen", "127.0.0.1:9", "--connections-max-idle-ms", "1000", "--max-request-bytes", "1MiB"})
	if err != nil {
		t.Fatal(err)
	}
	if fc := frontConfig(logger, o, nil, nil, 0, nil); fc != nil {
		t.Fatalf("a front without --cluster-nodes: %+v", fc)
	}
	nodes := []server.Node{{ID: 1, Host: "127.0.0.1", Port: 9}, {ID: 2, Host: "127.0.0.1", Port: 10}}
	fc := frontConfig(logger, o, nil, nodes, 100000, nil)
	if len(fc.Listeners) != 1 || fc.Listeners[0].Address != "127.0.0.1:9" || fc.NodeID != 1 || len(fc.Nodes) != 2 {
		t.Errorf("listeners %+v, node %d, nodes %+v", fc.Listeners, fc.NodeID, fc.Nodes)
	}
	if fc.MaxConnections != standby.DefaultMaxConnections || fc.IdleTimeout != time.Second || fc.MaxRequestBytes != 1<<20 {
		t.Errorf("bounds: %d connections, idle %v, frames %d", fc.MaxConnections, fc.IdleTimeout, fc.MaxRequestBytes)
	}
	if len(fc.SupportedFeatures) == 0 || len(fc.FinalizedFeatures) == 0 {
		t.Errorf("features: %+v, %+v", fc.SupportedFeatures, fc.FinalizedFeatures)
	}
	if fencedWhileStandby(nil) != nil || fencedWhileStandby(&remoteSettings{standby: true}) != nil {
		t.Error("a fence to wait for without a lease")
	}
}
