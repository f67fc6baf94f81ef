package conn

import (
	"crypto/tls"
	"net"
	"strconv"

	"inlet/auth"
	"inlet/transport"
)

// Stream listeners: TLS listeners (gnet has no TLS) and any listener after the first
// non-TLS one are served by the transport's stream back-end (a reader and a writer goroutine
// per connection on net and crypto/tls), with the same endpoint handler as the gnet listener,
// so every API behaves the same on both.

func (n *Node) startStreams() error {
	for i, l := range n.streams {
		nl, err := net.Listen("tcp", l.Address)
		if err == nil {
			l.nl, l.addr = nl, nl.Addr()
			err = l.resolveAdvertise()
		}
		if err != nil {
			for _, prev := range n.streams[:i+1] {
				if prev.nl != nil {
					prev.nl.Close()
				}
			}
			return err
		}
	}
	for _, l := range n.streams {
		n.log.Info("listening", "listener", l.Name, "protocol", l.Protocol, "addr", l.addr.String(), "advertise", net.JoinHostPort(l.advHost, strconv.Itoa(int(l.advPort))))
		n.tr.ServeStream(&endpoint{n, l}, l.nl, transport.StreamConfig{Name: l.Name, TLS: l.TLS})
	}
	return nil
}

// certPrincipal maps a verified client certificate to a principal: the configured user named
// by the certificate's common name, else a principal of that name with the listener's
// anonymous prefixes. No verified certificate: nil (the listener's anonymous principal
// applies).
func (n *Node) certPrincipal(l *listener, st tls.ConnectionState) (p *auth.Principal, user string) {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil, ""
	}
	cn := st.PeerCertificates[0].Subject.CommonName
	if u, ok := n.cfg.Users.Lookup(cn); ok {
		return &u.Principal, cn
	}
	p = &auth.Principal{Name: cn, TopicPrefixes: []string{"*"}}
	if l.Anonymous != nil {
		p.TopicPrefixes, p.GroupPrefixes = l.Anonymous.TopicPrefixes, l.Anonymous.GroupPrefixes
	}
	return p, ""
}

// closeStreams closes the stream listeners and connections and waits for their goroutines.
func (n *Node) closeStreams() {
	if len(n.streams) > 0 {
		n.tr.CloseStreams()
	}
}
