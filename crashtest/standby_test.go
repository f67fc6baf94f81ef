package crashtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/objstore/objtest"
)

// TestStandbyTakesOverAfterKillsAndStops: two nodes with the same flags but their ports and
// data directories, both --standby, on one prefix of versitygw. The first to start writes; the
// other stands by (listening on nothing). Numbered idempotent producers, seeded with both
// addresses, write a diskless topic. The writer is stopped four times (STANDBY_TAKEOVERS),
// SIGKILL and SIGTERM in turn; each time the standby takes the prefix and serves (a SIGTERM within 2 s, since the
// writer releases the prefix; a SIGKILL once the lease has gone unrenewed), and the stopped
// node is started again with its own flags and stands by, to take over at the next stop (on
// its old directory, which another writer wrote after it: it empties it and restores). At the
// end every acknowledged number is read once, in order: nothing acknowledged was lost across
// four takeovers, and the producers' retries stored nothing twice.
func TestStandbyTakesOverAfterKillsAndStops(t *testing.T) {
	s3 := versityEnv(t)
	// STANDBY_CLUSTER=1 runs the pair with --cluster-nodes (the standby answers clients);
	// TestFailoverChaosKill and -Stop cover that mode, this test the one without.
	nodes := standbyNodes(t, s3, "standby/", os.Getenv("STANDBY_CLUSTER") == "1")
	writer, standby := nodes[0], nodes[1]
	writer.start()
	standby.standBy()

	const topic, partitions = "orders", 2
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(writer.addr()))
	if err != nil {
		t.Fatal(err)
	}
	created, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1, map[string]*string{"diskless.enable": kadm.StringPtr("true")}, topic)
	admin.Close()
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %v", err, created.Err)
	}
	np := startNumberedProducers(t, ctx, writer.addr()+","+standby.addr(), topic, partitions, 120*time.Second)

	takeovers := 4
	if v, err := strconv.Atoi(os.Getenv("STANDBY_TAKEOVERS")); err == nil && v > 0 {
		takeovers = v // a measurement: scripts/record.sh standby-takeover env STANDBY_TAKEOVERS=10 go test ...
	}
	for k := 1; k <= takeovers; k++ {
		before := np.ackedCount()
		waitFor(t, 20*time.Second, "produce acknowledged by the writer", func() bool { return np.ackedCount() > before+2000 })
		stopped := time.Now()
		how := "SIGKILL"
		if k%2 == 0 {
			how = "SIGTERM"
			if st, _ := writer.terminate(30 * time.Second); st == nil {
				t.Fatal("the writer did not stop on SIGTERM")
			}
		} else {
			writer.kill()
		}
		if err := standby.waitReady(30 * time.Second); err != nil {
			t.Fatalf("takeover %d (%s): %v", k, how, err)
		}
		took := time.Since(stopped)
		acked := np.ackedCount()
		waitFor(t, 30*time.Second, "produce acknowledged by the new writer", func() bool { return np.ackedCount() > acked+100 })
		t.Logf("takeover %d after %s: serving %v after the stop, producing again %v after it", k, how, took.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
		// The bounds: the standby's look at the lease (every second at most), the lease itself
		// after a SIGKILL (1 s here), the restore, and slack for a loaded machine.
		if limit := 10 * time.Second; took > limit {
			t.Errorf("takeover %d after %s: serving %v after the stop, want at most %v", k, how, took, limit)
		}
		writer, standby = standby, writer
		standby.standBy() // the stopped node, started again with its own flags
	}
	np.finish(t, ctx)

	cl, err := kgo.NewClient(kgo.SeedBrokers(writer.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := int32(0); p < partitions; p++ {
		hw, _ := listOffsets(t, ctx, cl, topic, p)
		want := np.check(t, p, readPartition(t, ctx, writer.addr(), topic, p, hw))
		t.Logf("partition %d: %d acknowledged across %d takeovers, each read once", p, want, takeovers)
	}
}

// standbyNodes is two nodes, none started, with the same flags (bucketFlags on prefix,
// --standby, extra; with cluster, --cluster-nodes naming both) but their --node-id (1 and 2),
// ports and data directories. When the test ends each is killed (resumed first, if it was
// stopped), and its log tail printed if the test failed.
func standbyNodes(t *testing.T, s3 *objtest.Server, prefix string, cluster bool, extra ...string) [2]*inlet {
	t.Helper()
	var nodes [2]*inlet
	for i := range nodes {
		args := append(bucketFlags(s3, prefix), "--standby", "--node-id", fmt.Sprint(i+1))
		n := &inlet{t: t, dir: filepath.Join(t.TempDir(), "data"), args: append(args, extra...),
			logPath: filepath.Join(t.TempDir(), fmt.Sprintf("inlet-%d.log", i+1)), port: freePort(t)}
		nodes[i] = n
		t.Cleanup(func() {
			if n.running() {
				_ = n.cmd.Process.Signal(syscall.SIGCONT)
				n.kill()
			}
			if r := n.firstRace(); r != "" {
				t.Errorf("the race detector reported a data race in node %d:\n%s", i+1, r)
			}
			if t.Failed() {
				t.Logf("node %d's log tail:\n%s", i+1, n.logTail(30))
			}
		})
	}
	if cluster {
		list := fmt.Sprintf("1@%s,2@%s", nodes[0].addr(), nodes[1].addr())
		for _, n := range nodes {
			n.args = append(n.args, "--cluster-nodes", list)
		}
	}
	return nodes
}

// standBy starts n, a node of standbyNodes, and waits until it stands by.
func (n *inlet) standBy() {
	n.t.Helper()
	if err := n.launch(); err != nil {
		n.t.Fatal(err)
	}
	n.waitStandingBy(0)
}

// waitStandingBy waits until the current start's log, past its first from bytes, says the node
// stands by, and checks what it listens on meanwhile: nothing, or with --cluster-nodes the
// standby's front (which logs its own line, not the server's "listening").
func (n *inlet) waitStandingBy(from int64) {
	n.t.Helper()
	waitFor(n.t, 20*time.Second, "the node stands by", func() bool { return n.loggedSince(from, "standing by until its holder releases it") })
	front := slices.Contains(n.args, "--cluster-nodes")
	if n.loggedSince(from, "msg=listening") {
		n.t.Fatal("a standby started the server's listeners")
	}
	if got := n.loggedSince(from, "standby: answering clients"); got != front {
		n.t.Fatalf("a standby answers on its listeners: %v, want %v (--cluster-nodes given)", got, front)
	}
}
