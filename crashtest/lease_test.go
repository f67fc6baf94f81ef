package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/objstore"
	"inlet/objstore/objtest"
)

// versityEnv starts versitygw and gives the nodes its credentials.
func versityEnv(t *testing.T) *objtest.Server {
	s3 := objtest.StartVersity(t)
	for _, kv := range s3.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return s3
}

func bucketFlags(s3 *objtest.Server, prefix string) []string {
	return []string{"--s3-bucket", s3.Bucket, "--s3-endpoint", s3.Endpoint, "--s3-path-style", "--s3-prefix", prefix,
		"--bucket-lease-ms", "1000", "--remote-upload-interval-ms", "200", "--remote-object-bytes", "64KiB"}
}

// listKeys is every key under the prefix.
func listKeys(t *testing.T, ctx context.Context, b objstore.Bucket) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	if err := b.List(ctx, "", func(k string, _ int64) error { keys[k] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

// uploadedEnd is the end of the objects of partition p in keys (the highest end offset of a
// "<topic>/<id>/<p>/<base>-<end>[-e<epoch>]" key).
func uploadedEnd(keys map[string]bool, p int) int64 {
	end := int64(0)
	for k := range keys {
		parts := strings.Split(k, "/")
		if len(parts) != 4 || parts[2] != strconv.Itoa(p) {
			continue
		}
		be := strings.Split(parts[3], "-")
		if e, err := strconv.ParseInt(be[1], 10, 64); err == nil && e > end {
			end = e
		}
	}
	return end
}

// epochOf is a key's writer epoch (0 without one).
func epochOf(k string) uint64 {
	i := strings.LastIndex(k, "-e")
	if i < 0 {
		return 0
	}
	e, _ := strconv.ParseUint(strings.TrimSuffix(k[i+2:], ".json"), 10, 64)
	return e
}

// TestPausedWriterIsFencedByTheNodeThatTookItsPrefix: node A writes a tiered topic on a prefix
// and is SIGSTOPped; node B, on an empty data directory with --restore-from-remote, takes the
// prefix once A's lease has gone unrenewed for its duration, restores and serves. A, resumed
// with SIGCONT, acknowledges nothing more (a produce gets NOT_LEADER_OR_FOLLOWER, retriable)
// and changes nothing in the bucket (no key created, none deleted); B serves every record A
// had uploaded and takes new ones.
func TestPausedWriterIsFencedByTheNodeThatTookItsPrefix(t *testing.T) {
	s3 := versityEnv(t)
	metricsA := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a := startInlet(t, append(bucketFlags(s3, "fence/"), "--metrics-listen", metricsA)...)
	const topic = "tiered"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(a.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	created, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true")}, topic)
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %v", err, created.Err)
	}
	prodA, err := kgo.NewClient(kgo.SeedBrokers(a.addr()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prodA.Close()
	const records = 3000
	pad := strings.Repeat("x", 100)
	for i := 0; i < records; i += 100 {
		var rs []*kgo.Record
		for j := i; j < i+100; j++ {
			rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("%09d:%s", j, pad))})
		}
		if err := prodA.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to A: %v", err)
		}
	}
	bucket, err := objstore.OpenS3(ctx, s3.Config("fence/"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "A uploads every record", func() bool { return uploadedEnd(listKeys(t, ctx, bucket), 0) == records })

	// More records, acknowledged and not yet uploaded when A pauses: a writer that went on
	// after its resume would upload them.
	var tail []*kgo.Record
	for j := records; j < records+100; j++ {
		tail = append(tail, &kgo.Record{Value: []byte(fmt.Sprintf("%09d:%s", j, pad))})
	}
	if err := prodA.ProduceSync(ctx, tail...).FirstErr(); err != nil {
		t.Fatalf("produce to A: %v", err)
	}
	// A pauses; B takes the prefix once A's lease has run out, and restores.
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	b := &inlet{t: t, dir: filepath.Join(t.TempDir(), "data"), args: append(bucketFlags(s3, "fence/"), "--restore-from-remote"),
		logPath: filepath.Join(t.TempDir(), "inlet-b.log")}
	t.Cleanup(func() {
		if b.running() {
			b.kill()
		}
		if r := b.firstRace(); r != "" {
			t.Errorf("the race detector reported a data race in node B:\n%s", r)
		}
		if t.Failed() {
			t.Logf("node B's log tail:\n%s", b.logTail(40))
		}
	})
	b.start()
	if !b.logged("took the bucket prefix from a holder that stopped renewing it") {
		t.Fatal("B did not log taking the prefix from A")
	}
	if took := time.Since(paused); took < time.Second {
		t.Fatalf("B served %v after A paused, before A's lease (1 s) could have run out", took)
	}
	// B's first pass (the clean, then its uploads and descriptions under epoch 2) is done
	// once an epoch-2 description is there; from then on B deletes nothing (its next clean
	// is 10 minutes away, and the topic has no retention to apply).
	var atTake map[string]bool
	waitFor(t, 20*time.Second, "B's first pass", func() bool {
		atTake = listKeys(t, ctx, bucket)
		for k := range atTake {
			if strings.HasSuffix(k, ".json") && epochOf(k) == 2 {
				return true
			}
		}
		return false
	})

	// A resumes: it may not acknowledge, and learns it was fenced.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A client's produce is never acknowledged (kgo retries NOT_LEADER_OR_FOLLOWER until
	// its delivery timeout); the answer itself, read raw, is that retriable code.
	if err := prodA.ProduceSync(ctx, &kgo.Record{Value: []byte("after-the-take")}).FirstErr(); err == nil {
		t.Fatal("A acknowledged a produce after B took its prefix")
	}
	resp, err := produceRequest(topic, 0, idempotentBatch(-1, -1, -1, 1, "raw-after-the-take")).RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if ec := produceResult(t, resp).ErrorCode; ec != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to the fenced A: error code %d, want %d (NOT_LEADER_OR_FOLLOWER)", ec, kerr.NotLeaderForPartition.Code)
	}
	waitFor(t, 10*time.Second, "A's /readyz says it is fenced", func() bool {
		code, body := readyz(&http.Client{Timeout: 2 * time.Second}, metricsA)
		return code == 503 && strings.Contains(body, "fenced: prefix taken by node 1") && strings.Contains(body, "epoch 2")
	})
	if !a.logged("lease: fenced") {
		t.Error("A did not log that it was fenced")
	}
	time.Sleep(2 * time.Second) // A's tier loop runs passes meanwhile (every second, backing off)

	// Nothing A did after the take is in the bucket: every key there at B's first pass is
	// still there, and every new one is B's (epoch 2).
	after := listKeys(t, ctx, bucket)
	for k := range atTake {
		if !after[k] {
			t.Errorf("key %s deleted after B took the prefix", k)
		}
	}
	for k := range after {
		if !atTake[k] && epochOf(k) != 2 {
			t.Errorf("key %s written after B took the prefix, not by B", k)
		}
	}

	// B serves every record A uploaded, and takes new ones.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hw, _ := listOffsets(t, ctx, cl, topic, 0)
	if up := uploadedEnd(atTake, 0); hw != up || hw < records {
		t.Fatalf("B's high watermark %d, want the end of what A uploaded, %d (at least %d)", hw, up, records)
	}
	got := readPartition(t, ctx, b.addr(), topic, 0, hw)
	for i, num := range got {
		if num != i {
			t.Fatalf("B's record %d is number %d", i, num)
		}
	}
	prodB, err := kgo.NewClient(kgo.SeedBrokers(b.addr()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prodB.Close()
	r, err := prodB.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%09d:b", hw))}).First()
	if err != nil || r.Offset != hw {
		t.Fatalf("produce to B: offset %v, %v", r, err)
	}
	t.Logf("A paused with %d records acknowledged; B took the prefix and served the %d A had uploaded; A resumed and answered NOT_LEADER_OR_FOLLOWER", records+100, len(got))
}

// TestTwoNodesStartedOnOnePrefixOneRefuses: two nodes started at once on one prefix of an
// empty bucket, both with --restore-from-remote (an empty bucket starts a new node): one takes
// the prefix and serves, the other exits with an error naming it. The holder's SIGTERM then
// releases the prefix, and the refused node, started again, takes it at once.
func TestTwoNodesStartedOnOnePrefixOneRefuses(t *testing.T) {
	s3 := versityEnv(t)
	nodes := make([]*inlet, 2)
	for i := range nodes {
		nodes[i] = &inlet{t: t, dir: filepath.Join(t.TempDir(), "data"), args: append(bucketFlags(s3, "two/"), "--restore-from-remote"),
			logPath: filepath.Join(t.TempDir(), fmt.Sprintf("inlet-%d.log", i)), port: freePort(t)}
	}
	t.Cleanup(func() {
		for i, n := range nodes {
			if n.running() {
				n.kill()
			}
			if r := n.firstRace(); r != "" {
				t.Errorf("the race detector reported a data race in node %d:\n%s", i, r)
			}
			if t.Failed() {
				t.Logf("node %d's log tail:\n%s", i, n.logTail(30))
			}
		}
	})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.tryStart() })
	}
	wg.Wait()
	var winner, loser *inlet
	for i, n := range nodes {
		if errs[i] == nil {
			winner = n
		} else {
			loser = n
		}
	}
	if winner == nil || loser == nil {
		t.Fatalf("starts: %v; want one node serving and one refused", errs)
	}
	if loser.running() {
		t.Fatal("the refused node is still running")
	}
	if !loser.logged("renewed its lease while this node waited") || !loser.logged("held by node 1") {
		t.Fatal("the refused node's log does not name the holder that renewed its lease")
	}
	if loser.state.ExitCode() != 1 {
		t.Fatalf("the refused node exited %v, want status 1", loser.state)
	}
	if !winner.logged("took the bucket prefix, which had no writer") || !winner.logged("restored from the remote tier") {
		t.Fatal("the serving node did not start as a new node from the empty bucket")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(winner.addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to the node that took the prefix: %v", err)
	}
	// The lease, and the commit object that took the idempotent producer's block of producer
	// ids; nothing of the topic, which is neither tiered nor diskless.
	var keys []string
	for k := range listKeys(t, ctx, mustOpen(t, ctx, s3, "two/")) {
		if !strings.HasPrefix(k, "diskless/log/") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) != 1 || keys[0] != "writer.lease" {
		t.Fatalf("bucket holds %v besides commit objects, want the lease alone (the topic is not tiered)", keys)
	}

	// A graceful stop releases the lease: the refused node, started again, takes the
	// prefix at once rather than after a lease duration.
	if st, _ := winner.terminate(30 * time.Second); st == nil || st.ExitCode() != 0 {
		t.Fatalf("SIGTERM: %v", st)
	}
	began := time.Now()
	if err := loser.tryStart(); err != nil {
		t.Fatalf("start after the holder stopped: %v", err)
	}
	if !loser.logged("released by its last writer") {
		t.Fatal("the node started after a graceful stop did not take the released lease")
	}
	if took := time.Since(began); took >= time.Second {
		t.Errorf("took %v to start after a graceful stop, want less than the lease (1 s)", took)
	}
}

func mustOpen(t *testing.T, ctx context.Context, s3 *objtest.Server, prefix string) objstore.Bucket {
	t.Helper()
	b, err := objstore.OpenS3(ctx, s3.Config(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
