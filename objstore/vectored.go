package objstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// vectoredClient is the HTTP client OpenS3 gives the SDK. A PUT whose body is Streamed (marked
// on its context by Put) going to a plain http endpoint is written here: the request the SDK
// built and signed, its head and then the body written by itself on the connection (a
// *Buffers: its slices in vectored writes, writev, straight from where they lie), on a
// connection of its own pool. Everything else goes to next.
//
// Why not net/http: with a known Content-Length, its Transport copies every body through a
// 32 KiB buffer (io.LimitReader hides any WriterTo) and writes it in 32 KiB system calls. For
// a diskless node that was a fifth of its CPU flat out: the user-space copy of every byte
// produced, and a thousand writes per 32 MiB commit object (profiles/diskless-pipelined-20261206).
// And its Transport may go on reading a body after RoundTrip returns (a cancelled request's
// write loop), which a body of request frames, given back once the object has landed or
// failed, cannot allow: here the body is read only until Do returns.
//
// Over https a *Buffers body is copied whole before it is sent (Put): TLS copies it anyway, and
// net/http must not read the frames after Put returns.
type vectoredClient struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	dialer  net.Dialer
	timeout time.Duration // to the response's head once the body is written (ResponseHeaderTimeout)
	idle    chan *vectoredConn
}

// vectoredConn is a kept-alive connection of the pool and its reader.
type vectoredConn struct {
	c  net.Conn
	br *bufio.Reader
}

// vectoredBodyKey marks a Put's context with its Streamed body.
type vectoredBodyKey struct{}

const (
	maxIdleVectored    = 16      // connections kept alive: more than the PUTs a committer has in flight
	maxVectoredReplied = 1 << 20 // the most of a reply's body read (S3 answers a PUT with an empty one, or an error document)
)

func newVectoredClient(next interface {
	Do(*http.Request) (*http.Response, error)
}, timeout time.Duration) *vectoredClient {
	return &vectoredClient{next: next, dialer: net.Dialer{Timeout: timeout}, timeout: timeout,
		idle: make(chan *vectoredConn, maxIdleVectored)}
}

func (v *vectoredClient) Do(req *http.Request) (*http.Response, error) {
	body, _ := req.Context().Value(vectoredBodyKey{}).(Streamed)
	if body == nil || req.Method != http.MethodPut || req.URL.Scheme != "http" || req.ContentLength < 0 {
		return v.next.Do(req)
	}
	if proxy, err := http.ProxyFromEnvironment(req); err != nil || proxy != nil {
		// Through the proxy the environment names, as net/http goes; a *Buffers body as a
		// copy of its own, which net/http may read after the call returns.
		if bufs, ok := body.(*Buffers); ok {
			flat := bufs.Bytes()
			req.Body = io.NopCloser(bytes.NewReader(flat))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(flat)), nil }
		}
		return v.next.Do(req)
	}
	if req.Body != nil {
		req.Body.Close() // the SDK's wrapper of body: it is sent from here
	}
	head := requestHead(req)
	// A connection from the pool may have been closed by the server meanwhile: a failure on
	// one before any byte of a reply came back is tried once more on a new one. (A PUT that
	// landed anyway answers the second try ErrExists, which the callers of Put check.)
	if c := v.pooled(); c != nil {
		resp, replied, err := v.roundTrip(req, c, head, body)
		if err == nil || replied || req.Context().Err() != nil {
			return resp, err
		}
	}
	c, err := v.dial(req)
	if err != nil {
		return nil, err
	}
	resp, _, err := v.roundTrip(req, c, head, body)
	return resp, err
}

func (v *vectoredClient) pooled() *vectoredConn {
	select {
	case c := <-v.idle:
		return c
	default:
		return nil
	}
}

func (v *vectoredClient) dial(req *http.Request) (*vectoredConn, error) {
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	c, err := v.dialer.DialContext(req.Context(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &vectoredConn{c: c, br: bufio.NewReaderSize(c, 4<<10)}, nil
}

// requestHead is req's request line and headers as net/http would write them, with its
// Content-Length, without Expect (never signed: the SDK's signer skips it; the body follows
// at once).
func requestHead(req *http.Request) []byte {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.URL.RequestURI(), host, req.ContentLength)
	_ = req.Header.WriteSubset(&b, map[string]bool{"Host": true, "Content-Length": true, "Expect": true, "Transfer-Encoding": true})
	b.WriteString("\r\n")
	return b.Bytes()
}

var longAgo = time.Unix(1, 0)

// reply is what readReply read: the reply, its body read whole, whether any byte came back.
type reply struct {
	resp    *http.Response
	replied bool
	err     error
}

// roundTrip writes the request on c and reads its reply; replied says whether any byte of a
// reply came back. The reply is read while the body is written, as net/http does: a server
// may answer before it has read the body (versitygw answers a PUT whose key exists 412 at
// once and closes the connection, and the rest of the body meets a reset). c goes back to
// the pool only after a whole exchange that keeps it alive; otherwise it is closed. body is
// not read once roundTrip returns.
func (v *vectoredClient) roundTrip(req *http.Request, c *vectoredConn, head []byte, body Streamed) (*http.Response, bool, error) {
	ctx := req.Context()
	if d, ok := ctx.Deadline(); ok {
		_ = c.c.SetDeadline(d)
	}
	cancelled := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(longAgo) })
	replies := make(chan reply, 1)
	go func() { replies <- readReply(c.br, req) }()

	werr := writeRequest(c.c, head, body, req.ContentLength)
	if werr == nil && v.timeout > 0 {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > v.timeout {
			_ = c.c.SetReadDeadline(time.Now().Add(v.timeout))
		}
	}
	var r reply
	if werr != nil {
		// An early reply may be on its way, or already read: wait for it a moment.
		select {
		case r = <-replies:
		case <-time.After(time.Second):
			c.c.Close()
			r = <-replies
		}
	} else {
		r = <-replies
	}
	keep := werr == nil && r.err == nil && !r.resp.Close
	if !cancelled() || !keep {
		c.c.Close()
	} else {
		_ = c.c.SetDeadline(time.Time{})
		select {
		case v.idle <- c:
		default:
			c.c.Close()
		}
	}
	switch {
	case r.err == nil:
		return r.resp, true, nil
	case werr != nil:
		return nil, r.replied, ctxErr(ctx, werr)
	default:
		return nil, r.replied, ctxErr(ctx, r.err)
	}
}

// writeRequest writes the request's head and then its body, from the start, which must be
// size bytes.
func writeRequest(c net.Conn, head []byte, body Streamed, size int64) error {
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := c.Write(head); err != nil {
		return err
	}
	n, err := body.WriteTo(c)
	if err == nil && n != size {
		err = fmt.Errorf("objstore: a PUT body of %d bytes where %d were declared", n, size)
	}
	return err
}

// readReply reads the final reply to req from br (past any 1xx), its body whole.
func readReply(br *bufio.Reader, req *http.Request) reply {
	if _, err := br.Peek(1); err != nil {
		return reply{err: err}
	}
	var resp *http.Response
	for {
		var err error
		resp, err = http.ReadResponse(br, req)
		if err != nil {
			return reply{replied: true, err: err}
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		resp.Body.Close() // 100 Continue and the like: the reply follows
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxVectoredReplied))
	if err != nil {
		return reply{replied: true, err: err}
	}
	if n, _ := resp.Body.Read(make([]byte, 1)); n > 0 {
		return reply{replied: true, err: fmt.Errorf("objstore: a reply to PUT %s longer than %d bytes", req.URL.Path, maxVectoredReplied)}
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.Header.Set("Content-Length", strconv.Itoa(len(data)))
	return reply{resp: resp, replied: true}
}

// ctxErr is the context's error for a call it cut short (the deadline it set on the
// connection shows as a timeout), else err.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}
