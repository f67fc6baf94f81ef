package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"inlet/server"
)

// --cluster-nodes: every node that may write this node's bucket prefix, this one included,
// each with the address clients reach it at (its first listener's advertised address), as
// `id@host:port,...`: the same list on every node, like Kafka's controller.quorum.voters. The
// writer lists them all in Metadata and DescribeCluster, so a client that knows one address
// learns the others; a standby's front (server/standby) finds the writer by asking them.

// nodeAddr is n's host:port.
func nodeAddr(n server.Node) string { return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))) }

// parseClusterNodes checks --cluster-nodes: entries id@host:port, ids distinct and not
// negative (Kafka's node ids), addresses distinct, nodeID among them, and only with a bucket
// (the nodes of a prefix share it). Empty: nil, this node alone.
func parseClusterNodes(v string, nodeID int, haveBucket bool) ([]server.Node, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	if !haveBucket {
		return nil, fmt.Errorf("--cluster-nodes needs --s3-bucket: the nodes it lists share a bucket prefix")
	}
	var out []server.Node
	ids, addrs := map[int32]bool{}, map[string]bool{}
	self := false
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		idText, hostPort, ok := strings.Cut(e, "@")
		if !ok {
			return nil, fmt.Errorf("--cluster-nodes: %q is not id@host:port", e)
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--cluster-nodes: %q: the node id %q is not a non-negative integer", e, idText)
		}
		host, portText, err := net.SplitHostPort(hostPort)
		if err != nil {
			return nil, fmt.Errorf("--cluster-nodes: %q: %v", e, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("--cluster-nodes: %q: the port %q is not 1 to 65535", e, portText)
		}
		if host == "" {
			return nil, fmt.Errorf("--cluster-nodes: %q: no host (clients need an address to reach the node at)", e)
		}
		n := server.Node{ID: int32(id), Host: host, Port: int32(port)}
		if ids[n.ID] {
			return nil, fmt.Errorf("--cluster-nodes: node id %d is listed twice", n.ID)
		}
		if addrs[nodeAddr(n)] {
			return nil, fmt.Errorf("--cluster-nodes: the address %s is listed twice", nodeAddr(n))
		}
		ids[n.ID], addrs[nodeAddr(n)] = true, true
		self = self || int(n.ID) == nodeID
		out = append(out, n)
	}
	if !self {
		return nil, fmt.Errorf("--cluster-nodes does not list this node's --node-id %d: every node of the prefix lists all of them, itself included", nodeID)
	}
	return out, nil
}
