package kafka

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

func (s *Server) setupListeners() error {
	ls := s.cfg.Listeners
	if len(ls) == 0 {
		ls = []Listener{{Name: "PLAINTEXT", Address: s.cfg.Listen, Advertise: s.cfg.Advertise, Protocol: "PLAINTEXT"}}
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
			if s.cfg.Users == nil {
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
		if s.gnetL == nil && !tlsProto {
			s.gnetL = l
			s.cfg.Listen, s.cfg.Advertise = l.Address, l.Advertise
			continue
		}
		s.streams = append(s.streams, l)
	}
	return nil
}

// ListenerAddr returns the bound address of the listener named name ("" when there is none).
func (s *Server) ListenerAddr(name string) string {
	if s.gnetL != nil && s.gnetL.Name == name {
		return s.addr.String()
	}
	for _, l := range s.streams {
		if l.Name == name && l.addr != nil {
			return l.addr.String()
		}
	}
	return ""
}

// advertised is the broker address Metadata gives a client: its listener's.
func (s *Server) advertised(c *conn) (string, int32) {
	if c != nil && c.l != nil && c.l.advHost != "" {
		return c.l.advHost, c.l.advPort
	}
	return s.advHost, s.advPort
}

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
