package server

import (
	"net"

	"inlet/groups"
)

// The node is its own group and transaction coordinator (one broker: FindCoordinator always
// names it). Group state lives in package groups; committed offsets in the batch log.

func (s *Server) startGroups() error {
	c, err := groups.New(s.blog, groups.Config{
		Logger: s.log,
		PartitionExists: func(topic string, partition int32) bool {
			t, ok := s.blog.Topic(topic)
			return ok && partition >= 0 && int(partition) < len(t.Partitions)
		},
	})
	if err != nil {
		return err
	}
	s.groups = c
	return nil
}

// clientIDHost is the client id and host DescribeGroups reports for a member.
func clientIDHost(r *request) (string, string) {
	host := ""
	if a := r.c.gc.RemoteAddr(); a != nil {
		host = a.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	return string(r.hdr.ClientID), "/" + host
}
