package crashtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPausedDisklessWriterIsFencedAndItsLateWritesNeverRead: the fencing case of a diskless
// topic as an outside harness runs it. Every start of a node deletes its data directory and
// passes --restore-from-remote (the first on an empty bucket starts a new node); the topic is
// created by CreateTopics with diskless.enable=true.
//
// Node A takes the prefix and numbered idempotent producers write to it; A is SIGSTOPped
// with their requests in flight. Node B restores from the bucket, takes the prefix once A's
// lease has run out, and serves. A is resumed with SIGCONT, and kcat produces one record
// through it: it must be either acknowledged and then served by the new writer, or not
// acknowledged and never served. B serves every number A acknowledged, once, in order. Then B
// is SIGKILLed and a third node restores from the bucket alone: it serves the same, so
// nothing A wrote after B took the prefix is read by anyone.
func TestPausedDisklessWriterIsFencedAndItsLateWritesNeverRead(t *testing.T) {
	kcat := lookTool(t, "kcat", "/usr/bin/kcat")
	s3 := versityEnv(t)
	node := func(name string) *inlet {
		n := &inlet{t: t, dir: filepath.Join(t.TempDir(), "data"), args: append(bucketFlags(s3, "dfence/"), "--restore-from-remote"),
			logPath: filepath.Join(t.TempDir(), "inlet-"+name+".log")}
		t.Cleanup(func() {
			if n.running() {
				_ = n.cmd.Process.Signal(syscall.SIGCONT)
				n.kill()
			}
			if r := n.firstRace(); r != "" {
				t.Errorf("the race detector reported a data race in node %s:\n%s", name, r)
			}
			if t.Failed() {
				t.Logf("node %s's log tail:\n%s", name, n.logTail(40))
			}
		})
		if err := os.RemoveAll(n.dir); err != nil {
			t.Fatal(err)
		}
		n.start()
		return n
	}
	const topic, numbered = "fenced", 2 // partitions 0 and 1 numbered; 2 takes kcat's record
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	a := node("A")
	admin, err := kgo.NewClient(kgo.SeedBrokers(a.addr()))
	if err != nil {
		t.Fatal(err)
	}
	created, err := kadm.NewClient(admin).CreateTopic(ctx, numbered+1, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, topic)
	admin.Close()
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %v", err, created.Err)
	}
	np := startNumberedProducers(t, ctx, a.addr(), topic, numbered, 8*time.Second)
	waitFor(t, 20*time.Second, "A acknowledges numbered records", func() bool { return np.ackedCount() > 2000 })

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	b := node("B")
	if !b.logged("took the bucket prefix from a holder that stopped renewing it") {
		t.Fatal("B did not log taking the prefix from A")
	}
	if took := time.Since(paused); took < time.Second {
		t.Fatalf("B served %v after A paused, before A's lease (1 s) could have run out", took)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// kcat through the resumed A, acks=all, as a client that still knows only A would send.
	const probe = "kcat-through-the-resumed-writer"
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", a.addr(), "-t", topic, "-p", "2",
		"-X", "acks=all", "-X", "message.timeout.ms=8000", "-X", "enable.idempotence=true")
	cmd.Stdin = strings.NewReader(probe + "\n")
	var kout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &kout, &kout
	kerr := cmd.Run()
	delivered := kerr == nil && !strings.Contains(kout.String(), "ERROR")
	t.Logf("kcat through the resumed A: delivered %v (%v): %s", delivered, kerr, strings.TrimSpace(kout.String()))
	np.finish(t, ctx) // A's producers: acknowledged or failed, each, within their delivery timeout

	served := func(n *inlet, what string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for p := int32(0); p < numbered; p++ {
			hw, _ := listOffsets(t, ctx, cl, topic, p)
			want := np.check(t, p, readPartition(t, ctx, n.addr(), topic, p, hw))
			if want == 0 {
				t.Fatalf("%s, partition %d: nothing acknowledged", what, p)
			}
			t.Logf("%s, partition %d: %d acknowledged by A, all served once", what, p, want)
		}
		hw, _ := listOffsets(t, ctx, cl, topic, 2)
		found := false
		if hw > 0 {
			rd, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {2: kgo.NewOffset().At(0)}}))
			if err != nil {
				t.Fatal(err)
			}
			for read := int64(0); read < hw; {
				fs := rd.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("%s: partition 2 read %d of %d", what, read, hw)
				}
				fs.EachRecord(func(r *kgo.Record) {
					read = r.Offset + 1
					found = found || string(r.Value) == probe
				})
			}
			rd.Close()
		}
		if delivered && !found {
			t.Fatalf("%s: kcat's record was acknowledged by the resumed A but is not served", what)
		}
		if !delivered && found {
			t.Fatalf("%s: kcat's record was not acknowledged but is served", what)
		}
	}
	served(b, "B")
	b.kill()
	c := node("C")
	served(c, "C, restored after B's loss")
}
