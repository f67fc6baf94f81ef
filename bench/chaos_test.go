package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"inlet/bench/human"
)

// TestKillGapBounds: every gap is in [every/2, 3·every/2], both ends are reachable in
// principle, and the draws spread over the interval (mean near every).
func TestKillGapBounds(t *testing.T) {
	const every = 3 * time.Second
	k := newKillScheduler(42, every)
	var sum time.Duration
	lo, hi := time.Duration(1<<62), time.Duration(0)
	const n = 20000
	for range n {
		g := k.gap()
		if g < every/2 || g > every*3/2 {
			t.Fatalf("gap %v outside [%v, %v]", g, every/2, every*3/2)
		}
		sum += g
		lo, hi = min(lo, g), max(hi, g)
	}
	mean := sum / n
	if mean < every*95/100 || mean > every*105/100 {
		t.Errorf("mean gap %v, want about %v", mean, every)
	}
	if lo > every*52/100 || hi < every*148/100 {
		t.Errorf("gaps span only [%v, %v]", lo, hi)
	}
	// The same seed draws the same schedule.
	a, b := newKillScheduler(7, every), newKillScheduler(7, every)
	for range 10 {
		if a.gap() != b.gap() {
			t.Fatal("same seed, different gaps")
		}
	}
}

// TestNextKillStaysInSendingPeriod: a kill is scheduled only strictly before the end of
// sending, at now + a gap, and never beyond maxKills.
func TestNextKillStaysInSendingPeriod(t *testing.T) {
	const every = time.Second
	k := newKillScheduler(1, every)
	end := 10 * time.Second
	for i := range 5000 {
		now := time.Duration(i%12000) * time.Millisecond
		at, ok := k.nextKill(now, end, 0, 0)
		if at < now+every/2 || at > now+every*3/2 {
			t.Fatalf("kill at %v from now %v: gap outside bounds", at, now)
		}
		if ok != (at < end) {
			t.Fatalf("kill at %v with sending ending at %v: ok=%t", at, end, ok)
		}
	}
	if _, ok := k.nextKill(0, end, 3, 3); ok {
		t.Error("kill past maxKills")
	}
	if _, ok := k.nextKill(0, end, 3, 0); !ok {
		t.Error("maxKills 0 should not cap the kills")
	}
	if _, ok := k.nextKill(end, end, 0, 0); ok {
		t.Error("kill scheduled after sending ended")
	}
}

func TestLiveWatcherSignalsOnFirstLiveLine(t *testing.T) {
	var fwd bytes.Buffer
	w := &liveWatcher{w: &fwd, sending: make(chan struct{})}
	w.Write([]byte("topic \"bench\": 16 partitions (created)\n"))
	select {
	case <-w.sending:
		t.Fatal("signalled on the topic line")
	default:
	}
	w.Write([]byte("    1.0s   100,000 rec/s\n"))
	w.Write([]byte("    2.0s   100,000 rec/s\n"))
	select {
	case <-w.sending:
	default:
		t.Fatal("no signal on the first live line")
	}
	if strings.Count(fwd.String(), "\n") != 3 {
		t.Errorf("forwarded %q", fwd.String())
	}
}

func TestParsers(t *testing.T) {
	if ws, err := ParseInts("1, 2,4,,16"); err != nil || len(ws) != 4 || ws[3] != 16 {
		t.Errorf("ParseInts = %v, %v", ws, err)
	}
	for _, bad := range []string{"", "0", "1,x", "-2"} {
		if _, err := ParseInts(bad); err == nil {
			t.Errorf("ParseInts(%q) accepted", bad)
		}
	}
	if rs, err := ParseRates("0.25,0.5,100000"); err != nil || len(rs) != 3 || rs[2] != 100000 {
		t.Errorf("ParseRates = %v, %v", rs, err)
	}
	for _, bad := range []string{"", "0", "NaN", "1,-1"} {
		if _, err := ParseRates(bad); err == nil {
			t.Errorf("ParseRates(%q) accepted", bad)
		}
	}
	p, err := ParsePeer("redpanda=rpk start --kafka-addr 127.0.0.1:{port} --data={dir} | tee x=y")
	if err != nil || p.Name != "redpanda" || len(p.Argv) != 3 || p.Argv[2] != "rpk start --kafka-addr 127.0.0.1:{port} --data={dir} | tee x=y" {
		t.Errorf("ParsePeer = %+v, %v", p, err)
	}
	for _, bad := range []string{"noequals", "=cmd {port}", "x=", "x=no port", "a b=c {port}"} {
		if _, err := ParsePeer(bad); err == nil {
			t.Errorf("ParsePeer(%q) accepted", bad)
		}
	}
	if got := human.CommandLine([]string{"bin/bench", "compare", "--peer", "x=run {port} 'q'", "--targets", ""}); got != `bin/bench compare --peer 'x=run {port} '\''q'\''' --targets ''` {
		t.Errorf("CommandLine = %s", got)
	}
}

// TestChaosShort is the end-to-end check of `bench chaos`: 8 idempotent producers for 12 s
// against a freshly built inlet that is SIGKILLed and restarted two or three times, then every
// record is read back and must be there exactly once. About 20 s.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds inlet and runs for about 20 s")
	}
	f := shortChaos(t, Load{Producers: 8, Partitions: 8, RecordSize: 100, Idempotent: true, Duration: 12 * time.Second,
		MaxBufferedRecords: 2000})
	c := f.Chaos
	if c.Verdict != "exactly once: ok" || c.Loadgen.Verify.Lost != 0 || c.Loadgen.Verify.Duplicates != 0 {
		t.Errorf("verdict %q, verify %+v", c.Verdict, c.Loadgen.Verify)
	}
}

// TestChaosShortTransactional is TestChaosShort with transactional producers (transactions of
// 2,000 records, a fifth of them aborted): every committed record must be read exactly once,
// no record of an aborted transaction at all, and a transaction whose commit a kill left in
// doubt whole or not at all. About 20 s.
func TestChaosShortTransactional(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds inlet and runs for about 20 s")
	}
	f := shortChaos(t, Load{Producers: 8, Partitions: 8, RecordSize: 100, Idempotent: true, Duration: 12 * time.Second,
		MaxBufferedRecords: 2000, Transactional: true, TxnRecords: 2000, TxnAbortFraction: 0.2})
	c := f.Chaos
	res := c.Loadgen
	v := res.Verify
	if c.Verdict != "exactly once, transactional: ok" || v.Txn == nil || v.Lost != 0 || v.Duplicates != 0 ||
		v.Txn.AbortedVisible != 0 || v.Txn.Partial != 0 {
		t.Errorf("verdict %q, verify %+v %+v", c.Verdict, v, v.Txn)
	}
	tx := res.Transactions
	if tx == nil || tx.Committed == 0 || tx.AbortedChosen == 0 || v.Txn.Committed != tx.Committed ||
		v.Txn.CommittedRecords != tx.CommittedRecords || v.Found < tx.CommittedRecords || v.Found > tx.CommittedRecords+tx.InDoubtRecords {
		t.Errorf("transactions %+v, verify %+v %+v", tx, v, v.Txn)
	}
	if !strings.Contains(f.Label, "transactional (2000 records a transaction, 0.2 aborted)") {
		t.Errorf("label %q", f.Label)
	}
}

// shortChaos runs Chaos with load at 50,000 records/s against a freshly built inlet, killed
// every 2.5 s on average, at most 3 times, and fails t unless the run was OK with 2 or 3 kills
// and wrote its result files.
func shortChaos(t *testing.T, load Load) *File {
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "inlet")
	build := exec.Command("go", "build", "-o", bin, "inlet/cmd/inlet")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build inlet: %v\n%s", err, out)
	}
	results := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := Chaos(ctx, ChaosOptions{
		Env: Env{Root: root, ResultsDir: results, TmpDir: t.TempDir(), InletBin: bin, Command: "go test -run " + t.Name(),
			Stdout: &stdout, Stderr: &stderr},
		Load:      load,
		KillEvery: 2500 * time.Millisecond,
		MaxKills:  3,
		// At this rate verification reads back about 600,000 records in a few seconds; the
		// batches stay small, so many are in flight in every producer window at each kill.
		Rate:         50_000,
		FlushTimeout: time.Minute,
		Seed:         time.Now().UnixNano(),
		Storage:      "segments",
	})
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	c := f.Chaos
	if !c.OK {
		t.Fatalf("chaos run failed: %s: %v", c.Verdict, c.Failures)
	}
	if c.Kills < 2 || c.Kills > 3 {
		t.Errorf("%d kills (seed %d), want 2 or 3", c.Kills, c.Seed)
	}
	if _, err := os.Stat(filepath.Join(results, filepath.Base(f.Name))); err != nil {
		t.Errorf("result file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(results, "chaos.csv")); err != nil {
		t.Errorf("chaos.csv: %v", err)
	}
	return f
}
