package conn

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"inlet/auth"
)

// Listener is one address Inlet serves Kafka on, with its security protocol (Kafka's
// security.protocol: PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL).
//
// The first listener without TLS is served by gnet's event loops (the fast path); every other
// listener — all TLS listeners, since gnet has no TLS — by a reader and a writer goroutine per
// connection on net/crypto/tls: package transport's two back-ends. Both frame into the same
// pooled buffers under the same budget, reply in order, and hand frames to the same endpoint
// (conn.go) and per-connection worker, so every API behaves the same on both.
type Listener struct {
	Name       string
	Address    string // host:port (port 0 picks one)
	Advertise  string // host:port put in Metadata for clients of this listener; default the bound address
	Protocol   string // default PLAINTEXT
	Mechanisms []string
	TLS        *tls.Config // SSL and SASL_SSL
	// Anonymous is the principal of clients that do not authenticate (PLAINTEXT, and SSL
	// without a client certificate): nil means unrestricted.
	Anonymous *auth.Principal
}

// listener is a Listener being served.
type listener struct {
	Listener
	sasl    bool
	addr    net.Addr
	advHost string
	advPort int32
	nl      net.Listener // stream listeners only
}

func (n *Node) setupListeners() error {
	ls := n.cfg.Listeners
	if len(ls) == 0 {
		ls = []Listener{{Name: "PLAINTEXT", Address: n.cfg.Listen, Advertise: n.cfg.Advertise, Protocol: "PLAINTEXT"}}
	}
	for i := range ls {
		l := &listener{Listener: ls[i]}
		if l.Protocol == "" {
			l.Protocol = "PLAINTEXT"
		}
		if l.Name == "" {
			l.Name = l.Protocol
		}
		switch l.Protocol {
		case "PLAINTEXT", "SSL":
		case "SASL_PLAINTEXT", "SASL_SSL":
			l.sasl = true
			if n.cfg.Users == nil {
				return fmt.Errorf("server: listener %s: %s needs users", l.Name, l.Protocol)
			}
			if len(l.Mechanisms) == 0 {
				l.Mechanisms = auth.Mechanisms
			}
		default:
			return fmt.Errorf("server: listener %s: unknown security protocol %q", l.Name, l.Protocol)
		}
		tlsProto := l.Protocol == "SSL" || l.Protocol == "SASL_SSL"
		if tlsProto != (l.TLS != nil) {
			return fmt.Errorf("server: listener %s: protocol %s with TLS config set=%v", l.Name, l.Protocol, l.TLS != nil)
		}
		if n.gnetL == nil && !tlsProto {
			n.gnetL = l
			n.cfg.Listen, n.cfg.Advertise = l.Address, l.Advertise
			continue
		}
		n.streams = append(n.streams, l)
	}
	return nil
}

// isSASL tells whether a listener's security protocol authenticates with SASL.
func isSASL(protocol string) bool { return protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL" }

// AnySASL tells whether a listener of ls authenticates with SASL: only then is the
// pre-authentication budget (sasl.server.max.inflight.bytes) used.
func AnySASL(ls []Listener) bool {
	for _, l := range ls {
		if isSASL(l.Protocol) {
			return true
		}
	}
	return false
}

// ListenerAddr returns the bound address of the listener named name ("" when there is none).
func (n *Node) ListenerAddr(name string) string {
	if n.gnetL != nil && n.gnetL.Name == name {
		return n.addr.String()
	}
	for _, l := range n.streams {
		if l.Name == name && l.addr != nil {
			return l.addr.String()
		}
	}
	return ""
}

// Advertised is the address the default listener advertises.
func (n *Node) Advertised() (string, int32) { return n.advHost, n.advPort }

func (l *listener) resolveAdvertise() error {
	adv := l.Advertise
	if adv == "" {
		adv = l.addr.String()
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return fmt.Errorf("server: listener %s: advertise %q: %w", l.Name, adv, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("server: listener %s: advertise %q: bad port", l.Name, adv)
	}
	l.advHost, l.advPort = host, int32(p)
	return nil
}
