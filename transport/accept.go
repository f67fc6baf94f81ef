package transport

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Accepting connections. Both back-ends accept on a net.Listener in a goroutine of their own
// (acceptLoop) and hand each connection on: the stream back-end to a reader goroutine, the
// gnet back-end to its event loops (gnet.go, Client.Enroll). gnet's own acceptor is not used:
// when accept(2) fails with anything but EAGAIN, EINTR, ECONNRESET or ECONNABORTED it returns
// ErrAcceptSocket, the poller that called it exits, and the whole engine shuts down with every
// connection on it (gnet v2.9.7 acceptor_unix.go accept0 and reactor_default.go run). One
// EMFILE would then close every client and leave the port dead until a restart.
//
// An accept error never stops a listener here. Kafka's Acceptor (SocketServer.scala) logs an
// IOException from accept and goes on; net/http's Server.Serve and nats-server's acceptError
// back off (5 or 10 ms doubling to 1 s) and go on. This loop does both, and more for the
// errors that mean "no descriptor" (EMFILE, ENFILE, ENOBUFS, ENOMEM):
//   - The error is counted and logged (once per acceptLogEvery with the count in between), and
//     the listener is marked not serving (ListenerState; Inlet's /readyz fails while any is).
//   - A reserved descriptor (an open /dev/null, taken at start) is closed, the connection that
//     could not be accepted is accepted with it and closed at once, and the reserve is taken
//     again (libuv's uv__emfile_trick): its client sees the connection closed and can go
//     elsewhere or retry later, rather than waiting in the backlog until it times out.
//   - Then the loop waits, acceptBackoffMin doubling to acceptBackoffMax, and tries again.
//     While the listener is not serving, each Accept waits at most the backoff and the loop
//     tries to take the reserve again and two descriptors more: when it can, the next
//     connection finds what it needs and the listener is serving again, also when no client
//     happens to connect (so /readyz turns back by itself).
//
// max.connections, whose default leaves room for every other descriptor the node holds
// (cmd/inlet), keeps a healthy node from reaching EMFILE at all: the connection over it is
// accepted and closed at once (conn/limits.go), which takes one descriptor for a moment.
//
// KIP-612's max.connection.creation.rate (Config.MaxConnectionRate): the acceptor waits for a
// token before each accept, so connections over the rate wait in the listen backlog, as
// Kafka's Acceptor is throttled by ConnectionQuotas; one bucket serves every listener (Kafka's
// broker-wide limit).

const (
	acceptBackoffMin = 5 * time.Millisecond
	// acceptBackoffMax is under half the second within which a node whose descriptors were
	// freed must serve new connections again.
	acceptBackoffMax = 400 * time.Millisecond
	acceptLogEvery   = 10 * time.Second
	// shedAcceptWait bounds the accept made with the reserve: the connection that failed is
	// still queued, unless its client gave up in between.
	shedAcceptWait = 10 * time.Millisecond
)

// ListenerState is what a listener's acceptor has seen (Transport.Listeners).
type ListenerState struct {
	Name         string
	Serving      bool   // false while accepting fails (descriptors exhausted), or after it stopped for good
	AcceptErrors int64  // accept errors since start, the shed connections among them
	Shed         int64  // connections accepted with the reserve and closed at once
	LastError    string // the last accept error ("" when none yet)
}

// acceptor is one listener's accept loop.
type acceptor struct {
	t    *Transport
	name string
	nl   net.Listener
	// hand takes an accepted connection (and closes it when it cannot serve it); an error
	// that means no descriptor is treated as an accept error.
	hand func(nc net.Conn) error

	serving atomic.Bool
	errs    atomic.Int64
	shed    atomic.Int64
	lastErr atomic.Pointer[string]
	reserve int // the reserved descriptor, -1 when not held; the loop's own

	logAt    time.Time     // when an accept error was last logged
	unlogged int64         // accept errors since
	stop     chan struct{} // closed by close
	stopOnce sync.Once
	done     chan struct{} // closed when the loop has returned
}

// startAcceptor serves nl with hand until nl is closed.
func (t *Transport) startAcceptor(name string, nl net.Listener, hand func(net.Conn) error) *acceptor {
	a := &acceptor{t: t, name: name, nl: nl, hand: hand, reserve: -1, stop: make(chan struct{}), done: make(chan struct{})}
	a.serving.Store(true)
	a.takeReserve()
	t.streamMu.Lock()
	t.acceptors = append(t.acceptors, a)
	t.streamMu.Unlock()
	if f := t.cfg.ListenerEvent; f != nil {
		f(name, nil)
	}
	go a.loop()
	return a
}

// Listeners is the state of every listener's acceptor, in the order they were started.
func (t *Transport) Listeners() []ListenerState {
	t.streamMu.Lock()
	as := append([]*acceptor(nil), t.acceptors...)
	t.streamMu.Unlock()
	out := make([]ListenerState, 0, len(as))
	for _, a := range as {
		s := ListenerState{Name: a.name, Serving: a.serving.Load(), AcceptErrors: a.errs.Load(), Shed: a.shed.Load()}
		if p := a.lastErr.Load(); p != nil {
			s.LastError = *p
		}
		out = append(out, s)
	}
	return out
}

// close closes the listener and waits for the loop to return.
func (a *acceptor) close() {
	a.stopOnce.Do(func() {
		close(a.stop)
		a.nl.Close()
	})
	<-a.done
}

func (a *acceptor) takeReserve() bool {
	if a.reserve >= 0 {
		return true
	}
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	a.reserve = fd
	return true
}

// descriptorFree tells whether the process can open two descriptors now (beyond the
// reserve): what the next connection takes, the accepted socket and, on the gnet back-end,
// its duplicate in the loop's poller. With one free, accept succeeds and the duplicate fails,
// which closes the connection: still not serving.
func descriptorFree() bool {
	fd1, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd1)
	fd2, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	_ = unix.Close(fd2)
	return true
}

func (a *acceptor) dropReserve() {
	if a.reserve >= 0 {
		_ = unix.Close(a.reserve)
		a.reserve = -1
	}
}

// deadliner is what TCP and Unix listeners have.
type deadliner interface{ SetDeadline(time.Time) error }

func (a *acceptor) loop() {
	defer close(a.done)
	defer a.dropReserve()
	dl, _ := a.nl.(deadliner)
	backoff := acceptBackoffMin
	for {
		if !a.serving.Load() {
			if a.takeReserve() && descriptorFree() {
				a.setServing()
				backoff = acceptBackoffMin
				if dl != nil {
					_ = dl.SetDeadline(time.Time{})
				}
			} else if dl != nil {
				_ = dl.SetDeadline(time.Now().Add(backoff))
			}
		}
		if !a.t.rate.wait(a.stop) {
			a.serving.Store(false)
			return
		}
		nc, err := a.nl.Accept()
		if err == nil {
			a.t.rate.took()
			// hand fails only when it could not take the connection (gnet: no descriptor to
			// duplicate it into); the connection is closed then.
			if herr := a.hand(nc); herr != nil {
				a.failed(herr)
				time.Sleep(backoff)
				backoff = min(2*backoff, acceptBackoffMax)
				continue
			}
			if !a.serving.Load() {
				a.setServing()
				backoff = acceptBackoffMin
				if dl != nil {
					_ = dl.SetDeadline(time.Time{})
				}
			}
			continue
		}
		select {
		case <-a.stop:
			a.serving.Store(false)
			return
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			// Closed by someone else than close: the listener is gone for good, and says so.
			a.failed(err)
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue // a wait while not serving: take the reserve again
		}
		a.failed(err)
		if noDescriptor(err) {
			a.shedOne(dl)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, acceptBackoffMax)
	}
}

// shedOne closes the reserve, accepts the connection that could not be accepted (waiting at
// most shedAcceptWait for it) and closes it at once.
func (a *acceptor) shedOne(dl deadliner) {
	if a.reserve < 0 || dl == nil {
		return
	}
	a.dropReserve()
	_ = dl.SetDeadline(time.Now().Add(shedAcceptWait))
	if nc, err := a.nl.Accept(); err == nil {
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset: nothing of it is kept in the kernel
		}
		nc.Close()
		a.shed.Add(1)
	}
	a.takeReserve()
	// The loop sets the deadline again while not serving.
}

// failed counts and logs an accept error and marks the listener not serving.
func (a *acceptor) failed(err error) {
	a.errs.Add(1)
	s := err.Error()
	a.lastErr.Store(&s)
	if a.serving.Swap(false) || time.Since(a.logAt) >= acceptLogEvery {
		a.t.log.Error("accept failed; the listener goes on accepting", "listener", a.name, "err", err, "errors since last logged", a.unlogged)
		a.logAt, a.unlogged = time.Now(), 0
	} else {
		a.unlogged++
	}
	if f := a.t.cfg.ListenerEvent; f != nil {
		f(a.name, err)
	}
}

func (a *acceptor) setServing() {
	a.serving.Store(true)
	a.t.log.Info("accepting again", "listener", a.name, "accept errors", a.errs.Load(), "shed", a.shed.Load())
	if f := a.t.cfg.ListenerEvent; f != nil {
		f(a.name, nil)
	}
}

// noDescriptor tells an error that means the process or the system has no descriptor (or
// socket memory) to give.
func noDescriptor(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
		return true
	}
	return false
}

// acceptRate is KIP-612's max.connection.creation.rate: a token bucket refilled at rate per
// second holding at most one second's worth (Kafka measures the rate over one-second
// windows). nil: no limit.
type acceptRate struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
	// throttled, when set, is told each wait (metrics).
	throttled func(d time.Duration)
}

func newAcceptRate(rate float64, throttled func(time.Duration)) *acceptRate {
	if rate <= 0 {
		return nil
	}
	return &acceptRate{rate: rate, tokens: max(rate, 1), last: time.Now(), throttled: throttled}
}

// wait blocks until a connection may be accepted; false when done closed first.
func (r *acceptRate) wait(done <-chan struct{}) bool {
	if r == nil {
		return true
	}
	for {
		r.mu.Lock()
		now := time.Now()
		r.tokens = min(max(r.rate, 1), r.tokens+now.Sub(r.last).Seconds()*r.rate)
		r.last = now
		if r.tokens >= 1 {
			r.mu.Unlock()
			return true
		}
		d := time.Duration((1 - r.tokens) / r.rate * float64(time.Second))
		r.mu.Unlock()
		if r.throttled != nil {
			r.throttled(d)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return false
		}
	}
}

// took spends a token on a connection accepted.
func (r *acceptRate) took() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.tokens--
	r.mu.Unlock()
}
