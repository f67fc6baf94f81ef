package server

import (
	"encoding/binary"
	"sync"
	"time"

	"inlet/conn"
	"inlet/transport"
	"inlet/wire"
)

// request is one framed request (t: its bytes, connection and reply slot) and the state its
// handling reuses; pooled. Its connection c is package conn's, valid for as long as the
// request exists.
type request struct {
	t *transport.Request
	c *conn.Conn
	s *Server // the completer answers through it (Completed)
	// queued: counted in the connection's queued bytes (conn.Conn.Unqueue) until release.
	queued bool
	hdr    wire.RequestHeader

	// With metrics: when the frame's last byte arrived, and whether its API is known (handle
	// found it served), so release counts it under hdr.APIKey.
	start  time.Time
	served bool

	produce produceState
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

func getRequest() *request {
	r := requestPool.Get().(*request)
	if r.produce.log.Completion == nil {
		// Set once per pooled request: the log tells r itself (Completed), no closure.
		r.produce.log.Completion = r
	}
	return r
}

// frame is r's bytes without the length prefix; valid until release.
func (r *request) frame() []byte { return r.t.Bytes() }

// handler is the conn.Handler of the node's connections: s's dispatch.
type handler Server

var _ conn.Handler = (*handler)(nil)

// Holds: a Fetch long poll, JoinGroup and SyncGroup waiting for the group hold their
// connection while they wait.
func (h *handler) Holds(key int16) bool {
	switch key {
	case fetchKey, joinGroupKey, syncGroupKey:
		return true
	}
	return false
}

// Serve handles a request on its connection's worker. Requests of a connection that is gone
// are dropped here, unhandled, except Produce (conn.Conn): Kafka processes every request it
// has read, and an acks=0 producer may close right after writing.
func (h *handler) Serve(c *conn.Conn, t *transport.Request, arrived time.Time) {
	s := (*Server)(h)
	r := getRequest()
	r.t, r.c, r.s, r.start, r.queued = t, c, s, arrived, true
	if c.T().Gone() && !isProduceFrame(r) {
		s.finish(r, nil)
		return
	}
	s.handle(r)
}

// isProduceFrame tells from the api key at the head of the frame (frames are at least 8
// bytes) whether r is a Produce request. A raw SASL token has no header; on a gone connection
// it may pass as one, which is harmless: handle serves it as a token.
func isProduceFrame(r *request) bool {
	return binary.BigEndian.Uint16(r.frame()) == produceKey
}

// release returns a finished request's buffer and budget. Its reply slot must have been
// filled already. Every request passes here exactly once, which is where metrics count it.
func (s *Server) release(r *request) {
	if r.served {
		if m := s.m; m != nil {
			m.Done(r.hdr.APIKey, time.Since(r.start))
		}
		r.served = false
	}
	if r.queued {
		r.c.Unqueue(r.t.Size())
		r.queued = false
	}
	r.t.Release()
	r.t, r.c, r.s = nil, nil, nil
	requestPool.Put(r)
}

// shed gives back r's frame and budget before it waits (a Fetch long poll: its request is
// decoded, and nothing after reads the frame); see transport.Request.Shed.
func (s *Server) shed(r *request) {
	if r.queued {
		r.c.Unqueue(r.t.Size())
		r.queued = false
	}
	r.hdr.ClientID = nil // aliased the frame
	r.t.Shed()
}

// finish fills r's reply slot with out (nil: no reply) and releases r.
func (s *Server) finish(r *request, out *transport.Out) {
	r.t.Reply(out)
	s.release(r)
}

// newReply starts a reply frame: length placeholder and response header.
func newReply(correlationID int32, flexible bool, sizeHint int) *transport.Out {
	out := transport.GetOut(sizeHint)
	out.B = wire.AppendResponseHeader(out.B, correlationID, flexible)
	return out
}
