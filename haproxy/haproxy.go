// Package haproxy writes the HAProxy configuration that puts many Inlet nodes behind one
// address (`inlet haproxy-config`). HAProxy runs in TCP mode, reads the server name (SNI) of
// each connection's TLS ClientHello without terminating TLS, and passes the connection to the
// node that name belongs to: `<node>.<domain>` goes to node `<node>`. Certificates stay on
// the nodes. Each node advertises `<node>.<domain>:<the proxy's port>` on its TLS listener, so
// a client that learns the broker address from Metadata or FindCoordinator comes back through
// the proxy to the same node. The schema registry's HTTPS port is routed the same way, on a
// second front end.
//
// A connection whose first bytes are not a TLS ClientHello, or whose server name names no
// node (or that sends none), is refused: there is no default backend.
package haproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Node is one Inlet node of the node map.
type Node struct {
	Name         string `yaml:"name"`          // a DNS label: the node is <name>.<domain>
	Address      string `yaml:"address"`       // host name or IP address the proxy connects to
	KafkaPort    int    `yaml:"kafka_port"`    // the node's TLS Kafka listener
	RegistryPort int    `yaml:"registry_port"` // the node's HTTPS schema registry; 0: none
}

// nodeMap is the node file: `nodes:` and a list of nodes.
type nodeMap struct {
	Nodes []Node `yaml:"nodes"`
}

// ParseNodes reads a node map (YAML, docs/operations.md "Many nodes behind one address"). Unknown keys,
// missing fields, names that are not DNS labels or are used twice, addresses that are neither
// a host name nor an IP address, bad ports and two nodes on the same address and port are
// errors naming the node.
func ParseNodes(b []byte) ([]Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var m nodeMap
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no nodes")
		}
		return nil, err
	}
	if len(m.Nodes) == 0 {
		return nil, errors.New("no nodes")
	}
	names := map[string]int{}
	endpoints := map[string]string{} // address:port -> the node and field that use it
	for i := range m.Nodes {
		n := &m.Nodes[i]
		key := fmt.Sprintf("nodes[%d]", i)
		if n.Name == "" {
			return nil, fmt.Errorf("%s.name: missing", key)
		}
		if !isLabel(n.Name) {
			return nil, fmt.Errorf("%s.name: %q is not a DNS label (lowercase letters, digits and '-', at most 63)", key, n.Name)
		}
		if j, ok := names[n.Name]; ok {
			return nil, fmt.Errorf("%s.name: %q is also nodes[%d]", key, n.Name, j)
		}
		names[n.Name] = i
		key = fmt.Sprintf("nodes[%d] (%s)", i, n.Name)
		if err := checkAddress(n.Address); err != nil {
			return nil, fmt.Errorf("%s.address: %v", key, err)
		}
		n.Address = strings.ToLower(n.Address)
		if n.KafkaPort == 0 {
			return nil, fmt.Errorf("%s.kafka_port: missing", key)
		}
		for _, p := range []struct {
			field string
			port  int
		}{{"kafka_port", n.KafkaPort}, {"registry_port", n.RegistryPort}} {
			if p.port == 0 {
				continue // registry_port is optional; kafka_port was checked above
			}
			if p.port < 1 || p.port > 65535 {
				return nil, fmt.Errorf("%s.%s: %d is not a port (1-65535)", key, p.field, p.port)
			}
			ep := hostPort(n.Address, p.port)
			if other, ok := endpoints[ep]; ok {
				return nil, fmt.Errorf("%s.%s: %s is also %s", key, p.field, ep, other)
			}
			endpoints[ep] = n.Name + "." + p.field
		}
	}
	return m.Nodes, nil
}

// Options are the proxy's side: the domain under which nodes are named, and the addresses
// the proxy listens on.
type Options struct {
	Domain       string // nodes are <name>.<Domain>
	KafkaBind    string // host:port of the Kafka front end (host empty: every address)
	RegistryBind string // host:port of the registry front end; "": none (also when no node has a registry_port)
}

// inspectDelay is how long HAProxy waits for a connection's ClientHello before refusing it.
// A client sends its ClientHello at once; 5 s is HAProxy's documented example.
const inspectDelay = "5s"

// idleTimeout is the proxy's client and server inactivity timeout. It is longer than Inlet's
// connections.max.idle.ms default (10 minutes), so that the node, which knows whether a
// request is outstanding, is the one that closes idle connections; a long-polling Fetch waits
// far less than either.
const idleTimeout = "15m"

// Write writes the HAProxy configuration for nodes (from ParseNodes) to w.
func Write(w io.Writer, nodes []Node, o Options) error {
	if !isDomain(o.Domain) {
		return fmt.Errorf("domain %q is not a DNS name (lowercase labels separated by dots)", o.Domain)
	}
	if err := checkBind(o.KafkaBind); err != nil {
		return fmt.Errorf("kafka bind: %v", err)
	}
	_, kafkaPort, _ := net.SplitHostPort(o.KafkaBind)
	if o.RegistryBind != "" {
		if err := checkBind(o.RegistryBind); err != nil {
			return fmt.Errorf("registry bind: %v", err)
		}
		if _, p, _ := net.SplitHostPort(o.RegistryBind); p == kafkaPort {
			return fmt.Errorf("kafka and registry front ends both on port %s", p)
		}
	}
	hasRegistry := func(n Node) bool { return n.RegistryPort != 0 }
	registry := o.RegistryBind != "" && slices.ContainsFunc(nodes, hasRegistry)
	var b strings.Builder
	fmt.Fprintf(&b, "# HAProxy configuration for %d Inlet node(s) under %s, written by inlet haproxy-config.\n", len(nodes), o.Domain)
	b.WriteString(`#
# TCP mode: each connection goes to the node named by the server name (SNI) of its TLS
# ClientHello, and TLS ends on the node. Anything else (no ClientHello within the inspect
# delay, no server name, a name that is no node's) is refused: there is no default backend.
#
# Each node advertises <node>.` + o.Domain + `:` + kafkaPort + ` on its TLS listener (config file:
# listeners[].advertise) and holds a certificate for that name (or *.` + o.Domain + `).
`)
	if registry {
		b.WriteString("# A node with a registry_port serves its schema registry over HTTPS (registry_tls).\n")
	}
	b.WriteString("# DNS points *." + o.Domain + " at this proxy.\n")
	b.WriteString(`
global
    log stdout format raw local0

defaults
    mode tcp
    log global
    option tcplog
    timeout connect 5s
    timeout client ` + idleTimeout + `
    timeout server ` + idleTimeout + `
`)
	writeFrontend(&b, "kafka", o.KafkaBind, nodes, o.Domain, func(Node) bool { return true })
	if registry {
		writeFrontend(&b, "registry", o.RegistryBind, nodes, o.Domain, hasRegistry)
	}
	for _, n := range nodes {
		fmt.Fprintf(&b, "\nbackend kafka-%s\n    server %s %s\n", n.Name, n.Name, hostPort(n.Address, n.KafkaPort))
	}
	if registry {
		for _, n := range nodes {
			if hasRegistry(n) {
				fmt.Fprintf(&b, "\nbackend registry-%s\n    server %s %s\n", n.Name, n.Name, hostPort(n.Address, n.RegistryPort))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFrontend writes one SNI-routing front end for the nodes that serve it (at least
// one). The two
// content rules run before any backend is chosen: the first waits (up to inspectDelay) for
// a complete ClientHello, the second refuses a server name that is not in the list.
func writeFrontend(b *strings.Builder, name, bind string, nodes []Node, domain string, serves func(Node) bool) {
	var hosts []string
	for _, n := range nodes {
		if serves(n) {
			hosts = append(hosts, n.Name+"."+domain)
		}
	}
	fmt.Fprintf(b, "\nfrontend %s\n    bind %s\n", name, bind)
	fmt.Fprintf(b, "    tcp-request inspect-delay %s\n", inspectDelay)
	b.WriteString("    tcp-request content reject unless { req_ssl_hello_type 1 }\n")
	fmt.Fprintf(b, "    tcp-request content reject unless { req_ssl_sni -i %s }\n", strings.Join(hosts, " "))
	for _, n := range nodes {
		if serves(n) {
			fmt.Fprintf(b, "    use_backend %s-%s if { req_ssl_sni -i %s.%s }\n", name, n.Name, n.Name, domain)
		}
	}
}

// hostPort joins an address and a port as HAProxy reads them (IPv6 in brackets).
func hostPort(addr string, port int) string {
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

func checkAddress(a string) error {
	if a == "" {
		return errors.New("missing (a host name or an IP address)")
	}
	if _, err := netip.ParseAddr(a); err == nil {
		if strings.Contains(a, "%") {
			return fmt.Errorf("%q: a zoned IPv6 address is not supported", a)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(a); err == nil {
		return fmt.Errorf("%q has a port: give it as kafka_port or registry_port", a)
	}
	if !isHostName(a) {
		return fmt.Errorf("%q is neither a host name nor an IP address", a)
	}
	return nil
}

// checkBind checks a front end's host:port (an empty host binds every address).
func checkBind(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("%q is not host:port", hp)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: bad port", hp)
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%q: the host must be an IP address (or empty for every address)", hp)
	}
	return nil
}

// isLabel reports whether s is a lowercase DNS label (RFC 1123): letters, digits and '-', not
// at either end, 1 to 63 characters.
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isDomain reports whether s is a lowercase DNS name of one or more labels, short enough
// that "<node>." fits in front of it.
func isDomain(s string) bool { return len(s) <= 253-64 && isName(s) }

// isHostName reports whether s is a host name the proxy can resolve (upper case allowed). A
// name whose last label is all digits is a mistyped IPv4 address, not a name (RFC 1123 2.1).
func isHostName(s string) bool {
	s = strings.ToLower(s)
	last := s[strings.LastIndexByte(s, '.')+1:]
	return len(s) <= 253 && isName(s) && strings.Trim(last, "0123456789") != ""
}

func isName(s string) bool {
	for _, l := range strings.Split(s, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}
