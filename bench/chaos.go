package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"inlet/bench/human"
	"inlet/bench/proc"
	"inlet/loadgen"
)

// ChaosOptions are the flags of `bench chaos`.
type ChaosOptions struct {
	Env
	Load Load
	// KillEvery is the mean time between SIGKILLs; each gap is drawn uniformly from
	// [KillEvery/2, 3·KillEvery/2].
	KillEvery time.Duration
	// MaxKills caps the kills (0: as many as fit in the sending period).
	MaxKills int
	// Down is how long the broker stays dead before it is restarted.
	Down time.Duration
	// Rate is loadgen's offered records/s (0: flat out). Flat out, reading everything back
	// for the verification takes about as long as the sending did.
	Rate float64
	// FlushTimeout is how long loadgen waits for outstanding acks after sending stops; it
	// must outlast a restart, since kgo retries what a kill left unacknowledged.
	FlushTimeout time.Duration
	// Seed of the kill schedule; 0 picks one from the clock (recorded in the result).
	Seed      int64
	Storage   string
	Workers   int
	InletArgs []string
}

// killScheduler decides when the next SIGKILL lands.
type killScheduler struct {
	rng   *rand.Rand
	every time.Duration
}

func newKillScheduler(seed int64, every time.Duration) *killScheduler {
	return &killScheduler{rng: rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15)), every: every}
}

// gap draws the time to the next kill, uniform in [every/2, 3·every/2].
func (k *killScheduler) gap() time.Duration {
	return k.every/2 + time.Duration(k.rng.Int64N(int64(k.every)+1))
}

// nextKill returns when the next kill is due, as time since sending started, given the time
// now; false when it would fall at or after sendEnd (a kill must land while producers are
// sending) or maxKills (if > 0) kills were done.
func (k *killScheduler) nextKill(now, sendEnd time.Duration, done, maxKills int) (time.Duration, bool) {
	if maxKills > 0 && done >= maxKills {
		return 0, false
	}
	at := now + k.gap()
	return at, at < sendEnd
}

// liveWatcher forwards loadgen's live output and closes sending at its first per-second line,
// which loadgen writes one second after the producers started sending (the line before it
// names the topic and comes before the producers connect).
type liveWatcher struct {
	w       io.Writer
	once    sync.Once
	sending chan struct{}
}

func (l *liveWatcher) Write(p []byte) (int, error) {
	if !strings.HasPrefix(string(p), "topic ") {
		l.once.Do(func() { close(l.sending) })
	}
	if l.w != nil {
		return l.w.Write(p)
	}
	return len(p), nil
}

// Chaos runs loadgen with verification against inlet while SIGKILLing and restarting it on the
// same data directory and port, then reports the kills survived and the verification: for
// idempotent producers no loss and no duplicates, for plain ones no loss (duplicates counted),
// for transactional ones (Load.Transactional) every committed record exactly once, no record of
// an aborted transaction, and each transaction whose commit outcome was lost to a kill either
// whole or absent. The returned file's Chaos.OK is false when anything failed.
func Chaos(ctx context.Context, o ChaosOptions) (*File, error) {
	if o.KillEvery <= 0 {
		return nil, errors.New("--kill-every must be positive")
	}
	if o.Load.Duration <= 0 {
		return nil, errors.New("--duration must be positive")
	}
	if err := o.Env.Prepare(); err != nil {
		return nil, err
	}
	e := &o.Env
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	label := fmt.Sprintf("%s, %s, kill every %v", o.Load.Label(), storageLabel(o.Storage), o.KillEvery)
	f := e.newFile(KindChaos, label)
	c := &ChaosOutcome{KillEverySeconds: o.KillEvery.Seconds(), Seed: o.Seed}
	f.Chaos = c
	r := &chaosRun{o: &o, e: e, c: c}

	base, err := os.MkdirTemp(e.TmpDir, "inlet-chaos-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if e.KeepData || !c.OK {
			fmt.Fprintf(e.Stderr, "bench chaos: kept %s (data and server log)\n", base)
		} else {
			os.RemoveAll(base)
		}
	}()
	dir, logPath := filepath.Join(base, "data"), filepath.Join(base, "server.log")
	c.DataFS = proc.FSType(base)
	target := e.InletTarget("inlet", o.Load, o.Storage, o.Workers, o.InletArgs)
	srv, err := proc.Start(target, dir, logPath)
	if err != nil {
		return nil, err
	}
	r.srv = srv
	c.Argv = target.Expand(srv.Port(), dir)

	out := r.killWhileSending(ctx)
	if !srv.Running() {
		c.UnexpectedExits++
		r.failf("inlet was not running at the end: %v", srv.State())
	} else if _, err := srv.Stop(); err != nil {
		r.failf("stop: %v", err)
	}
	r.judge(out)
	f.Interrupted = ctx.Err() != nil
	if err := e.finish(f); err != nil {
		return f, err
	}
	writeChaosSummary(e.Stdout, f)
	if !c.OK {
		fmt.Fprintf(e.Stderr, "bench chaos: server log tail (%s):\n%s\n", logPath, proc.LogTail(logPath, 30))
	}
	return f, nil
}

// chaosRun is one chaos run under way: its options, the broker it kills and the outcome it
// fills in.
type chaosRun struct {
	o   *ChaosOptions
	e   *Env
	c   *ChaosOutcome
	srv *proc.Server
}

// chaosLoad is what the verified loadgen run returned.
type chaosLoad struct {
	res *loadgen.Result
	err error
}

func (r *chaosRun) failf(format string, a ...any) {
	r.c.Failures = append(r.c.Failures, fmt.Sprintf(format, a...))
}

// killWhileSending runs loadgen with verification against the broker and, while its
// producers send, kills and restarts the broker on the kill schedule; it returns when loadgen
// has finished (acks and verification included).
func (r *chaosRun) killWhileSending(ctx context.Context) chaosLoad {
	o, e, c, srv := r.o, r.e, r.c, r.srv
	cfg := o.Load.Config(srv.Addr(), o.Rate)
	cfg.Verify = true
	cfg.FlushTimeout = o.FlushTimeout
	watch := &liveWatcher{w: e.Live, sending: make(chan struct{})}
	cfg.Live = watch
	done := make(chan chaosLoad, 1)
	go func() {
		res, err := loadgen.Run(ctx, cfg)
		done <- chaosLoad{res, err}
	}()
	fmt.Fprintf(e.Stderr, "bench chaos: %s on %s for %v, SIGKILL every %v on average (seed %d)\n",
		o.Load.Label(), srv.Addr(), o.Load.Duration, o.KillEvery, o.Seed)

	var out chaosLoad
	finished := false
	select {
	case <-watch.sending:
	case out = <-done:
		finished = true
	}
	sched := newKillScheduler(o.Seed, o.KillEvery)
	sendStart := time.Now().Add(-time.Second)
	for !finished {
		at, ok := sched.nextKill(time.Since(sendStart), o.Load.Duration, c.Kills, o.MaxKills)
		if !ok {
			break
		}
		timer := time.NewTimer(time.Until(sendStart.Add(at)))
		select {
		case out = <-done:
			finished = true
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
		if finished || ctx.Err() != nil {
			break
		}
		if !r.killAndRestart(sendStart) {
			break
		}
	}
	if !finished {
		fmt.Fprintf(e.Stderr, "bench chaos: %d kills done; waiting for the acks and the verification\n", c.Kills)
		out = <-done
	}
	return out
}

// killAndRestart kills the broker, waits Down and starts it again, recording the kill and
// the restart; a broker found dead is restarted and counted as an unexpected exit. False: the
// broker could not be killed or restarted, and the run kills no more.
func (r *chaosRun) killAndRestart(sendStart time.Time) bool {
	o, e, c, srv := r.o, r.e, r.c, r.srv
	if !srv.Running() {
		c.UnexpectedExits++
		r.failf("inlet exited without being killed: %v", srv.State())
		if err := srv.Restart(); err != nil {
			r.failf("restart: %v", err)
			return false
		}
		return true
	}
	if err := srv.Kill(); err != nil {
		r.failf("%v", err)
		return false
	}
	killedAt := time.Since(sendStart)
	c.Kills++
	c.KillAt = append(c.KillAt, killedAt.Seconds())
	time.Sleep(o.Down)
	began := time.Now()
	if err := srv.Restart(); err != nil {
		r.failf("restart after kill %d: %v", c.Kills, err)
		return false
	}
	c.RestartSeconds = append(c.RestartSeconds, time.Since(began).Seconds())
	fmt.Fprintf(e.Stderr, "bench chaos: kill %d at %.1fs, back in %v; about %v of sending left\n", c.Kills,
		killedAt.Seconds(), time.Since(began).Round(time.Millisecond), max(o.Load.Duration-time.Since(sendStart), 0).Round(time.Second))
	return true
}

// judge records loadgen's result and every reason the run failed, and sets the verdict.
func (r *chaosRun) judge(out chaosLoad) {
	c := r.c
	res := out.res
	c.Loadgen = res
	switch {
	case out.err != nil:
		r.failf("loadgen: %v", out.err)
	case res.Interrupted:
		r.failf("interrupted")
	case res.Verify == nil:
		r.failf("not verified")
	}
	if res != nil {
		r.judgeResult(res)
	}
	c.OK = len(c.Failures) == 0
	if c.Verdict == "" {
		c.Verdict = "not verified"
	}
	if !c.OK && !strings.HasSuffix(c.Verdict, "FAILED") {
		c.Verdict += " (run FAILED)"
	}
}

// judgeResult checks loadgen's verification and its producers' counts.
func (r *chaosRun) judgeResult(res *loadgen.Result) {
	c, failf := r.c, r.failf
	if v := res.Verify; v != nil {
		c.Verdict = v.Verdict()
		if !v.OK {
			failf("%s: lost %d, duplicates %d, out of order %d, malformed %d, unknown %d", v.Verdict(), v.Lost,
				v.Duplicates, v.OutOfOrder, v.Malformed, v.Unknown)
			if t := v.Txn; t != nil {
				failf("transactions: %d aborted records read, %d in-doubt transactions partly read", t.AbortedVisible, t.Partial)
			}
		}
		if v.Error != "" {
			failf("verification could not finish: %s", v.Error)
		}
	}
	if res.FlushTimedOut {
		failf("acks still outstanding %v after sending stopped", res.Settings.FlushTimeout)
	}
	if res.Unresolved > 0 {
		failf("%d records neither acked nor failed", res.Unresolved)
	}
	switch {
	case res.Transactions != nil:
		// A transactional producer's records can fail (a kill can cost a transaction its
		// producer epoch, or its partitions); each such transaction is aborted, and the
		// verification checks that none of its records is visible. Only a producer that
		// gave up, or a run that committed nothing, fails here.
		for _, p := range res.Producers {
			if p.TxnBroken {
				failf("producer %d (%s) stopped early: it could not end or begin a transaction", p.Producer, p.TransactionalID)
			}
		}
		if res.Transactions.Committed == 0 && res.Settings.TxnAbortFraction < 1 {
			failf("no transaction committed")
		}
	case res.Failed > 0:
		// kgo retries without limit, so a failure means a client gave up on the broker.
		failf("%d records failed on the producer side: %v", res.Failed, res.Errors)
	}
	if res.Acked == 0 {
		failf("nothing acknowledged")
	}
}

func writeChaosSummary(w io.Writer, f *File) {
	c := f.Chaos
	fmt.Fprintf(w, "chaos: %s\n", f.Label)
	fmt.Fprintf(w, "kills survived  %d (at %s s; restarts took %s s)\n", c.Kills, floats(c.KillAt, 1), floats(c.RestartSeconds, 2))
	if res := c.Loadgen; res != nil {
		fmt.Fprintf(w, "records         sent %s, acked %s, failed %s, %s records/s\n", human.Thousands(float64(res.Sent)),
			human.Thousands(float64(res.Acked)), human.Thousands(float64(res.Failed)), human.Thousands(res.RecordsPerSec))
		if t := res.Transactions; t != nil {
			fmt.Fprintf(w, "transactions    committed %s, aborted %s (%s chosen, %s after an error), in doubt %s; clients recreated %s\n",
				human.Thousands(float64(t.Committed)), human.Thousands(float64(t.Aborted)), human.Thousands(float64(t.AbortedChosen)),
				human.Thousands(float64(t.Aborted-t.AbortedChosen)), human.Thousands(float64(t.InDoubt)), human.Thousands(float64(t.ClientsRecreated)))
		}
		if v := res.Verify; v != nil {
			fmt.Fprintf(w, "verify          read %s, lost %s, duplicates %s, out of order %s\n", human.Thousands(float64(v.Read)),
				human.Thousands(float64(v.Lost)), human.Thousands(float64(v.Duplicates)), human.Thousands(float64(v.OutOfOrder)))
			if t := v.Txn; t != nil {
				fmt.Fprintf(w, "                aborted records read %s of %s; in doubt: %s read whole, %s not read, %s partial\n",
					human.Thousands(float64(t.AbortedVisible)), human.Thousands(float64(t.AbortedRecords)), human.Thousands(float64(t.InDoubtCommitted)),
					human.Thousands(float64(t.InDoubtAborted)), human.Thousands(float64(t.Partial)))
			}
		}
	}
	fmt.Fprintf(w, "verdict         %s\n", c.Verdict)
	for _, m := range c.Failures {
		fmt.Fprintf(w, "  failure: %s\n", m)
	}
}

func floats(xs []float64, prec int) string {
	if len(xs) == 0 {
		return "–"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = human.Fixed(x, prec)
	}
	return strings.Join(parts, ", ")
}
