package transport

import (
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Writing a large reply to a gnet connection a piece at a time (the pump).
//
// gnet writes what the socket takes at once and copies the rest into its outbound buffer, which
// grows to hold it all: a 40 MiB fetch reply to a consumer that reads it at its own pace was
// held twice, once in the reply frame and once in gnet's copy, until the consumer had read it,
// and every byte the socket did not take at once was copied again. So replies of a gnet
// connection that hold more than pumpChunk, or bytes placed from elsewhere (Out.Ref: a
// fetch's cold batches, left in their read buffers), go through the pump: they wait in the
// connection's backlog (in order, behind nothing else of it) and the loop writes them to the
// socket itself, with writev from where they lie, at most pumpChunk bytes in at most
// pumpIovecs pieces a call, only while gnet's outbound buffer is empty (so the order of
// bytes holds). What the socket does not take stays where it is, in the reply: nothing of it
// is copied into gnet's buffer. gnet tells nothing when the socket can take more (it watches
// for that only while its own buffer holds bytes), so while a backlog waits the connection is
// woken every pumpPoll (pollPump; less often while the client reads nothing) to write more.
// A reply goes back to the pool (or the collector) once its last byte is written.
//
// Who owns what: the backlog and pumping are under wmu (reply appends from any goroutine);
// pumpLive, the replies' sent counts and the writes are the loop's. reply starts the pump with
// an AsyncWritev of nothing, queued behind any write already queued, so the order of replies
// holds; the pump runs on the loop from that write's callback and, once that has run
// (pumpLive), from OnTraffic. The socket is written without wmu held: a failing write closes
// the connection, and markClosed takes wmu to drop the backlog.
const (
	pumpChunk  = 1 << 20
	pumpIovecs = 256 // at most IOV_MAX (1024) pieces a writev
	pumpPoll   = time.Millisecond
)

// pumps tells whether outs go through the pump on c (a gnet connection, with a backlog
// waiting, a reply placed from several buffers, or more than a chunk). Under wmu.
func (c *Conn) pumps(outs []*Out) bool {
	if !c.gnet {
		return false
	}
	if c.pumping {
		return true
	}
	n := 0
	for _, o := range outs {
		if len(o.refs) > 0 {
			return true
		}
		n += len(o.B)
	}
	return n > pumpChunk
}

// startPump queues outs (charged already) behind c's backlog and, if the pump is not running,
// starts it on the loop, behind the writes queued before. Under wmu.
func (c *Conn) startPump(outs []*Out) {
	for _, o := range outs {
		o.sent = 0
	}
	c.backlog = append(c.backlog, outs...)
	if c.pumping {
		return
	}
	c.pumping = true
	err := c.w.AsyncWritev(nil, func(gc gnet.Conn, err error) error {
		c.pumpLive = true
		c.pump(gc, err)
		return nil
	})
	if err != nil {
		// The loop's poller is gone (as for the fast path in reply: it closes only after
		// markClosed has run for every connection, which waits for wmu, held here, so this
		// is not expected): nothing will be written.
		c.dropBacklog()
	}
}

// pump writes the backlog to the socket while gnet's outbound buffer is empty and the socket
// takes it all, then polls again while any is left. On the loop, once pumping has started.
func (c *Conn) pump(gc gnet.Conn, err error) {
	for {
		if err != nil || c.gone.Load() {
			c.wmu.Lock()
			c.dropBacklog()
			c.wmu.Unlock()
			c.pumpLive = false
			return
		}
		c.wmu.Lock()
		if len(c.backlog) == 0 {
			c.pumping, c.pumpLive = false, false
			c.backlog = nil
			c.wmu.Unlock()
			c.pumpWait = 0
			c.setSockOut(int64(gc.OutboundBuffered()))
			return
		}
		o := c.backlog[0]
		c.wmu.Unlock()
		if n := gc.OutboundBuffered(); n > 0 {
			// Written before the pump started (a reply that went to gnet whole): it goes
			// first.
			c.setSockOut(int64(n))
			c.pollPump()
			return
		}
		var want int
		c.vec, want = o.appendVec(c.vec[:0], o.sent, pumpChunk, pumpIovecs)
		n, werr := unix.Writev(gc.Fd(), c.vec)
		clear(c.vec)
		if werr != nil && werr != unix.EAGAIN && werr != unix.EINTR {
			_ = gc.Close()
			err = werr
			continue
		}
		n = max(n, 0)
		o.sent += n
		c.pumped += n
		if o.sent == o.Len() {
			c.wmu.Lock()
			c.backlog[0] = nil
			c.backlog = c.backlog[1:]
			c.wmu.Unlock()
			o.taken(gc, nil)
			continue
		}
		if werr != nil || n < want {
			c.pollPump() // the socket is full
			return
		}
	}
}

// dropBacklog hands back the replies still waiting in the backlog: the connection is gone
// (or its loop, when the pump could not start). Under wmu.
func (c *Conn) dropBacklog() {
	for _, o := range c.backlog {
		o.taken(nil, nil)
	}
	clear(c.backlog)
	c.backlog = nil
	c.pumping = false
}

// pollPump arms a timer that wakes c to pump again (gnet): pumpPoll after the socket took
// some of the backlog since the last look, twice the last wait (up to heldPoll) after it took
// nothing, so a client that stops reading costs a wake-up every heldPoll, as any unread output
// does. On the loop.
func (c *Conn) pollPump() {
	switch {
	case c.pumpWait == 0 || c.pumped != c.pumpSeen:
		c.pumpWait = pumpPoll
	default:
		c.pumpWait = min(2*c.pumpWait, heldPoll)
	}
	c.pumpSeen = c.pumped
	if c.pumpPolling.CompareAndSwap(false, true) {
		time.AfterFunc(c.pumpWait, func() {
			c.pumpPolling.Store(false)
			if !c.gone.Load() {
				_ = c.w.Wake(nil)
			}
		})
	}
}
