package transport

import (
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Writing a large reply to a gnet connection a piece at a time (the pump).
//
// gnet writes what the socket takes at once and copies the rest into its outbound buffer, which
// grows to hold it all: a 40 MiB fetch reply to a consumer that reads it at its own pace was
// held twice, once in the reply frame and once in gnet's copy, until the consumer had read it.
// So replies of a gnet connection that hold more than pumpChunk go through the pump: they
// wait in the connection's backlog (in order, behind nothing else of it) and the loop hands
// them to gnet pumpChunk at a time, only while gnet's outbound buffer holds less than
// pumpChunk. gnet tells nothing when its buffer drains, so while a backlog waits the
// connection is woken every pumpPoll (pollPump; less often while the client reads nothing) to
// hand on more. gnet then holds about two chunks of a connection's pumped replies (a chunk
// more when a new backlog's first chunk lands on a full buffer), and a reply frame goes back
// to the pool (or the collector) once its last chunk is handed on.
//
// Who owns what: the backlog and pumping are under wmu (reply appends from any goroutine);
// pumpLive and the writes are the loop's. reply starts the pump with an AsyncWrite of the
// first chunk, queued behind any write already queued, so the order of replies holds; the
// pump runs on the loop from that write's callback and, once that has run (pumpLive), from
// OnTraffic. gnet's Write is called without wmu held: a failing write closes the connection
// at once, and markClosed takes wmu to drop the backlog.
const (
	pumpChunk = 1 << 20
	pumpPoll  = time.Millisecond
)

// pumps tells whether out goes through the pump on c (a gnet connection, with a backlog
// waiting or a reply larger than a chunk). Under wmu.
func (c *Conn) pumps(outs []*Out) bool {
	if !c.gnet {
		return false
	}
	if c.pumping {
		return true
	}
	n := 0
	for _, o := range outs {
		n += len(o.B)
	}
	return n > pumpChunk
}

// startPump queues outs (charged already) behind c's backlog and, if the pump is not running,
// starts it with an AsyncWrite of the first chunk. Under wmu.
func (c *Conn) startPump(outs []*Out) {
	for _, o := range outs {
		o.sent = 0
	}
	c.backlog = append(c.backlog, outs...)
	if c.pumping {
		return
	}
	c.pumping = true
	o, chunk, last := c.nextChunk()
	c.queued.Add(1)
	err := c.w.AsyncWrite(chunk, func(gc gnet.Conn, err error) error {
		if last {
			o.taken(gc, err)
		}
		c.pumpLive = true
		c.pump(gc, err)
		c.queued.Add(-1)
		return nil
	})
	if err != nil {
		c.queued.Add(-1)
		// The loop's poller is gone (as for the fast path in reply: it closes only after
		// markClosed has run for every connection, which waits for wmu, held here, so this
		// is not expected): nothing will be written.
		if last {
			o.taken(nil, nil)
		}
		c.dropBacklog()
	}
}

// nextChunk takes the next chunk of the backlog's first reply; last: that was its end, and the
// reply is off the backlog (the caller hands it back with taken once the chunk is written).
// Under wmu, with a backlog.
func (c *Conn) nextChunk() (o *Out, chunk []byte, last bool) {
	o = c.backlog[0]
	end := min(o.sent+pumpChunk, len(o.B))
	chunk, o.sent = o.B[o.sent:end], end
	if end == len(o.B) {
		c.backlog[0] = nil
		c.backlog = c.backlog[1:]
		return o, chunk, true
	}
	return o, chunk, false
}

// pump hands the backlog to gnet while its outbound buffer holds less than a chunk, then
// polls again while any is left. On the loop, once the first chunk's write has called back.
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
			// What gnet holds is counted before pumping ends: a reply written from another
			// goroutine (writeNow) then sees it.
			c.setSockOut(int64(gc.OutboundBuffered()))
			c.pumping, c.pumpLive = false, false
			c.backlog = nil
			c.wmu.Unlock()
			c.pumpWait = 0
			return
		}
		if n := gc.OutboundBuffered(); n >= pumpChunk {
			c.wmu.Unlock()
			c.setSockOut(int64(n))
			c.pollPump(n)
			return
		}
		o, chunk, last := c.nextChunk()
		c.wmu.Unlock()
		_, err = gc.Write(chunk)
		if last {
			o.taken(gc, err)
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

// pollPump arms a timer that wakes c to pump again (gnet), buffered being what gnet's outbound
// buffer holds now: pumpPoll after the socket took some of it since the last look, twice the
// last wait (up to heldPoll) after it took nothing, so a client that stops reading costs a
// wake-up every heldPoll, as any unread output does. On the loop.
func (c *Conn) pollPump(buffered int) {
	switch {
	case c.pumpWait == 0 || buffered != c.pumpSeen:
		c.pumpWait = pumpPoll
	default:
		c.pumpWait = min(2*c.pumpWait, heldPoll)
	}
	c.pumpSeen = buffered
	if c.pumpPolling.CompareAndSwap(false, true) {
		time.AfterFunc(c.pumpWait, func() {
			c.pumpPolling.Store(false)
			if !c.gone.Load() {
				_ = c.w.Wake(nil)
			}
		})
	}
}
