package main

import (
	"log/slog"
	"os"
	"runtime"
)

// schedulerProcs gives the Go scheduler one P (GOMAXPROCS) per gnet event loop beyond the
// CPUs it would use. A loop waits for its sockets in epoll_wait, a plain system call (gnet
// runs its own epoll, not the runtime's network poller), and a goroutine in a system call
// keeps its P until the runtime's monitor takes it back, 20 µs to 10 ms later. With
// GOMAXPROCS at the CPU count, loops asleep in epoll_wait hold Ps that the goroutines made
// runnable meanwhile (a connection's worker, the completer, a woken long poll) wait for. The
// loops use their Ps only while they run callbacks, so the extra Ps add no work of their own;
// what they change is measured in BENCHMARKS.md, "Waiting for a CPU in the tail". A
// GOMAXPROCS in the environment wins, as the runtime reads it itself.
func schedulerProcs(logger *slog.Logger, loops int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if loops <= 0 {
		loops = runtime.NumCPU() // gnet's default with multicore
	}
	cpus := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(cpus + loops)
	logger.Debug("scheduler", "GOMAXPROCS", cpus+loops, "cpus", cpus, "event loops", loops)
}
