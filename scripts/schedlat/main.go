// Command schedlat reads a Go execution trace (the broker's /debug/pprof/trace) and prints how
// long goroutines waited to run once they were runnable, grouped by what made them runnable:
// the goroutine that woke them (its two innermost frames outside the runtime), a return from
// a system call without a P, a yield or preemption, or their creation. Each line gives the
// count, the total and the mean, p50, p90 and p99 of those waits, largest total first.
//
// It is a module of its own, so that the broker's module does not take on the trace parser:
//
//	cd scripts/schedlat && go run . TRACE [LINES]
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: schedlat TRACE [LINES]")
		os.Exit(2)
	}
	lines := 20
	if len(os.Args) > 2 {
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "schedlat: LINES must be a number")
			os.Exit(2)
		}
		lines = n
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedlat:", err)
		os.Exit(1)
	}
	defer f.Close()
	waits, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedlat:", err)
		os.Exit(1)
	}
	keys := make([]string, 0, len(waits))
	for k := range waits {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(waits[b].sum - waits[a].sum) })
	for _, k := range keys[:min(lines, len(keys))] {
		fmt.Printf("%s\n    %s\n", waits[k], k)
	}
}

// read returns the waits of every goroutine from runnable to running, by cause.
func read(r io.Reader) (map[string]*waits, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	type runnable struct {
		at    trace.Time
		cause string
	}
	pending := map[trace.GoID]runnable{}
	blockedIn := map[trace.GoID]string{} // where each goroutine last blocked
	byCause := map[string]*waits{}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			return byCause, nil
		}
		if err != nil {
			return nil, err
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		id := st.Resource.Goroutine()
		from, to := st.Goroutine()
		switch to {
		case trace.GoWaiting:
			blockedIn[id] = frames(st.Stack)
		case trace.GoNotExist:
			delete(blockedIn, id)
		case trace.GoRunnable:
			var cause string
			switch from {
			case trace.GoWaiting:
				// ev.Stack is the waker's.
				cause = "woken by " + frames(ev.Stack()) + " (waiting in " + blockedIn[id] + ")"
			case trace.GoSyscall:
				cause = "back from a system call without a P"
			case trace.GoRunning:
				cause = "yield or preemption in " + frames(st.Stack)
			case trace.GoNotExist:
				cause = "created"
			default:
				cause = "from " + from.String()
			}
			pending[id] = runnable{ev.Time(), cause}
		case trace.GoRunning:
			if p, ok := pending[id]; ok {
				w := byCause[p.cause]
				if w == nil {
					w = &waits{}
					byCause[p.cause] = w
				}
				w.add(time.Duration(ev.Time() - p.at))
				delete(pending, id)
			}
		}
	}
}

// frames is the two innermost frames of st outside the runtime, the standard library's
// synchronization and system calls.
func frames(st trace.Stack) string {
	var out []string
	for f := range st.Frames() {
		fn := f.Func
		for _, p := range []string{"runtime.", "sync.", "internal/", "syscall.", "golang.org/x/sys/"} {
			if strings.HasPrefix(fn, p) {
				fn = ""
				break
			}
		}
		if fn == "" {
			continue
		}
		out = append(out, fn)
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return strings.Join(out, " < ")
}

type waits struct {
	sum time.Duration
	all []time.Duration
}

func (w *waits) add(d time.Duration) { w.sum += d; w.all = append(w.all, d) }

func (w *waits) String() string {
	slices.Sort(w.all)
	q := func(p float64) float64 { return float64(w.all[int(float64(len(w.all)-1)*p)]) / 1e3 }
	return fmt.Sprintf("n %6d  total %7.1f ms  mean %6.1f µs  p50 %6.1f  p90 %6.1f  p99 %7.1f µs",
		len(w.all), float64(w.sum)/1e6, float64(w.sum)/float64(len(w.all))/1e3, q(.5), q(.9), q(.99))
}
