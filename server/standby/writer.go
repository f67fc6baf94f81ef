package standby

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
	"inlet/wire"
)

// Finding the writer. The front asks the other nodes of --cluster-nodes, at the addresses
// listed there (their first listeners, plain TCP: the first listener must take clients
// without SASL or TLS), the node it found last first. A node that answers a Metadata or a
// DescribeCluster with itself as controller is the writer (Inlet's writer is every
// partition's leader and the controller; a standby's front answers controller -1). A front
// never forwards what another front sent it (forwardedClientID), so two standbys do not ask
// each other in a loop.

// forwardedClientID is the client id of the requests a front forwards.
const forwardedClientID = "inlet-standby-front"

// writerCacheFor is how long a writer found answers FindCoordinator without asking again.
const writerCacheFor = time.Second

// writerCache is the writer found last.
type writerCache struct {
	mu    sync.Mutex
	node  server.Node
	found time.Time // zero: none
}

func (w *writerCache) get() (server.Node, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.node, w.found
}

func (w *writerCache) set(n server.Node, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok {
		w.node, w.found = n, time.Now()
	} else {
		w.found = time.Time{}
	}
}

// Writer is the writer the front found last, and whether one answered at the last look.
func (f *Front) Writer() (server.Node, bool) {
	n, at := f.writer.get()
	return n, !at.IsZero()
}

// forward sends the request (key at version, body as the client encoded it) to the writer
// and returns the writer's response body, decoded into resp as well; isWriter tells from the
// decoded response whether the node that answered it is the writer. ok false: no writer
// answered before deadline.
func (f *Front) forward(key, version int16, body []byte, resp kmsg.Response, isWriter func(server.Node) bool, deadline time.Time) ([]byte, bool) {
	order := f.peers
	if w, at := f.writer.get(); !at.IsZero() {
		order = make([]*peer, 0, len(f.peers))
		for _, p := range f.peers {
			if p.node.ID == w.ID {
				order = append([]*peer{p}, order...)
			} else {
				order = append(order, p)
			}
		}
	}
	for _, p := range order {
		if time.Now().After(deadline) {
			break
		}
		rb, err := p.roundTrip(key, version, body, deadline)
		if err != nil {
			f.cfg.Logger.Debug("standby: asking a node for the writer", "node", p.node.ID, "err", err)
			continue
		}
		resp.SetVersion(version)
		if err := resp.ReadFrom(rb); err != nil {
			f.cfg.Logger.Debug("standby: a node's answer does not decode", "node", p.node.ID, "err", err)
			continue
		}
		if isWriter(p.node) {
			f.writer.set(p.node, true)
			return rb, true
		}
	}
	f.writer.set(server.Node{}, false)
	return nil, false
}

// findWriter is the writer: the one found within writerCacheFor, else the one that answers a
// Metadata of no topic now.
func (f *Front) findWriter(deadline time.Time) (server.Node, bool) {
	if n, at := f.writer.get(); !at.IsZero() && time.Since(at) < writerCacheFor {
		return n, true
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	req.Topics = []kmsg.MetadataRequestTopic{} // none (nil would be every topic)
	body := req.AppendTo(nil)
	resp := kmsg.NewPtrMetadataResponse()
	var w server.Node
	_, ok := f.forward(metadataKey, req.Version, body, resp, func(n server.Node) bool {
		w = n
		return resp.ControllerID == n.ID
	}, deadline)
	return w, ok
}

// peer is the connection to another node: one request at a time (slot), dialed when needed
// and dropped on any error.
type peer struct {
	node     server.Node
	addr     string
	maxBytes int
	slot     chan struct{}
	corr     int32 // guarded by slot

	mu     sync.Mutex // guards c's assignment and closed, so that close can cut an exchange short
	c      net.Conn   // used under slot
	closed bool
}

func newPeer(n server.Node, maxBytes int) *peer {
	return &peer{node: n, addr: net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))), maxBytes: maxBytes, slot: make(chan struct{}, 1)}
}

// roundTrip sends one request and returns the response body (after its header), by deadline.
func (p *peer) roundTrip(key, version int16, body []byte, deadline time.Time) ([]byte, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case p.slot <- struct{}{}:
	case <-t.C:
		return nil, errors.New("busy until the deadline")
	}
	defer func() { <-p.slot }()
	rb, err := p.exchange(key, version, body, deadline)
	if err != nil {
		p.mu.Lock()
		if p.c != nil {
			_ = p.c.Close()
			p.c = nil
		}
		p.mu.Unlock()
	}
	return rb, err
}

func (p *peer) exchange(key, version int16, body []byte, deadline time.Time) ([]byte, error) {
	if p.c == nil {
		d := net.Dialer{Deadline: deadline}
		c, err := d.Dial("tcp", p.addr)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return nil, net.ErrClosed
		}
		p.c = c
		p.mu.Unlock()
	}
	_ = p.c.SetDeadline(deadline)
	p.corr++
	flexible := requestFlexible(key, version)
	b := make([]byte, 4, 4+10+len(forwardedClientID)+1+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(p.corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(forwardedClientID)))
	b = append(b, forwardedClientID...)
	if flexible {
		b = append(b, 0) // no tagged fields
	}
	b = append(b, body...)
	wire.PatchFrameLength(b)
	if _, err := p.c.Write(b); err != nil {
		return nil, err
	}
	var lenBuf [4]byte
	if _, err := io.ReadFull(p.c, lenBuf[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(lenBuf[:]))
	if n < 4 || int(n) > p.maxBytes {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(p.c, frame); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != p.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, p.corr)
	}
	rb := frame[4:]
	if wire.ResponseHeaderFlexible(key, version) {
		var err error
		if rb, err = skipTags(rb); err != nil {
			return nil, err
		}
	}
	return rb, nil
}

// close closes the connection, cutting an exchange in flight short, and keeps it closed.
func (p *peer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.c != nil {
		_ = p.c.Close()
	}
}

func requestFlexible(key, version int16) bool {
	fv := wire.FlexibleVersion(key)
	return fv >= 0 && version >= fv
}

// skipTags skips a tagged-field section (KIP-482: a count, then tag, size and bytes each).
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad tagged fields")
	}
	b = b[n:]
	for range count {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// LookForWriter is the writer as found within the last second, or asked now (at most
// timeout): for /readyz and the logs.
func (f *Front) LookForWriter(timeout time.Duration) (server.Node, bool) {
	return f.findWriter(time.Now().Add(timeout))
}
