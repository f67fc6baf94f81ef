package crashtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFailoverChaosKill and TestFailoverChaosStop: a writer and a standby on one
// prefix of versitygw (standbyNodes: the same flags, --cluster-nodes naming both, but their node
// ids, ports and data directories) under every kind of client at once, each seeded with both
// addresses: 16 idempotent producers, a client (a producer id) each, write numbered records to
// a diskless topic's 16 partitions; a transactional consume-transform-produce sink in a
// consumer group (txnSink) copies them to a second diskless topic; kcat (librdkafka's
// idempotent producer) writes a line every 20 ms to a third, one process for the whole run.
// Every ~10 s the writer is stopped and the standby takes over, FAILOVER_TAKEOVERS times (5 by
// default):
//   - Kill: SIGKILL; the killed node is started again with its own flags and stands by.
//   - Stop: SIGSTOP until the standby serves (the writer's lease has run out), then SIGCONT:
//     the resumed writer is fenced. A client that knows only its address produces one record
//     through it at once: the record is either acknowledged and then served by the new writer,
//     or neither (a fenced node's late writes are never read). The fenced node must re-execute
//     itself as a standby, by itself, the same process.
//
// A standby answers Metadata as the writer's relay: both nodes at their addresses, the writer
// the controller and every partition's leader (checked at every standby's start). Each
// takeover is timed from the signal to the standby serving (it answers Metadata as the
// controller) and to the first record sent after the signal being acknowledged; each run ends
// with a summary line of both (median, worst). After each takeover the group's committed
// offsets, as the new writer answers them, are at least those of every transaction the sink
// was told committed before it, and the sink never consumes below them. At the end
// (checkSinkExactlyOnce): every input partition holds 0, 1, 2, ... with every acknowledged
// number, once; the sink drains; read_committed reads each output partition as exactly its
// input's numbers. kcat, closed, reports every line delivered and none failed, and the topic
// holds exactly its lines, in order, each once, those it wrote after the first takeover's
// signal among them: it rode through without a restart.
func TestFailoverChaosKill(t *testing.T) { testFailoverChaos(t, false) }

// TestFailoverChaosStop: a fenced node neither drains nor closes its log; it re-executes at
// once (cmd/inlet/main.go). It once drained for up to 30 s, its requests waiting on bucket
// writes it could never make, accepting connections only to close them unanswered (an EOF on
// a connection's first request, which franz-go does not retry): producers' records failed.
func TestFailoverChaosStop(t *testing.T) { testFailoverChaos(t, true) }

func testFailoverChaos(t *testing.T, pause bool) {
	kcat := lookTool(t, "kcat", "/usr/bin/kcat")
	s3 := versityEnv(t)
	how, prefix := "SIGKILL", "failover-kill/"
	if pause {
		how, prefix = "SIGSTOP", "failover-stop/"
	}
	nodes := standbyNodes(t, s3, prefix, true)
	ids := map[*inlet]int32{nodes[0]: 1, nodes[1]: 2}
	seeds := nodes[0].addr() + "," + nodes[1].addr()
	writer, standby := nodes[0], nodes[1]
	writer.start()
	standby.standBy()
	standby.waitRelays(t, ids, ids[writer], "")

	const (
		in, out, side, group = "failover-in", "failover-out", "failover-side", "failover-sink"
		partitions           = 16
		// every is about how long each writer serves before it is stopped.
		every = 10 * time.Second
	)
	takeovers := 5
	if v, err := strconv.Atoi(os.Getenv("FAILOVER_TAKEOVERS")); err == nil && v > 0 {
		takeovers = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second+time.Duration(takeovers)*20*time.Second)
	defer cancel()
	began := time.Now()

	adminCl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	diskless := map[string]*string{"diskless.enable": kadm.StringPtr("true")}
	resps, err := kadm.NewClient(adminCl).CreateTopics(ctx, partitions, 1, diskless, in, out)
	if err == nil {
		var r kadm.CreateTopicResponse
		// side: partition 0 takes kcat's lines, 1 the records produced through a fenced node.
		r, err = kadm.NewClient(adminCl).CreateTopic(ctx, 2, 1, diskless, side)
		resps[side] = r
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resps {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}

	// 16 × 250 records a second, as in TestNodeLossKeepsDisklessRecordsTransactionsAndOffsets.
	np := startNumberedProducersPaced(t, ctx, seeds, in, partitions, 120*time.Second,
		numberedPace{burst: 10, pause: 40 * time.Millisecond, clientEach: true})
	sk := &txnSink{t: t, addr: seeds, in: in, out: out, group: group, stop: make(chan struct{}), done: make(chan struct{}),
		held: make(chan int, 1), release: make(chan struct{}), known: map[int32]int64{}}
	go sk.run(ctx)
	stopSink := sync.OnceFunc(func() { close(sk.stop); <-sk.done })
	defer stopSink()
	kc := startKcat(t, ctx, kcat, seeds, side, 0)
	defer func() {
		if t.Failed() {
			_ = kc.cmd.Process.Kill() // rather than wait for it to deliver what it holds
		}
		kc.finish(t)
	}()

	var serving, producing []time.Duration
	fedAtFirst := int64(-1) // kcat's lines written before the first takeover's signal
	probes := map[string]bool{}
	since := time.Now()
	for k := 1; k <= takeovers; k++ {
		// Each stop lands on a writer that has acknowledged records and committed sink
		// transactions since it took over, about every seconds after it did.
		commits, acked := sk.commitCount(), np.ackedCount()
		deadline := time.Now().Add(every + 30*time.Second)
		for sk.commitCount() < commits+2 || np.ackedCount() < acked+1000 || time.Since(since) < every {
			if time.Now().After(deadline) {
				t.Fatalf("takeover %d: in %v the writer acknowledged %d records and the sink committed %d transactions",
					k, time.Since(since).Round(time.Millisecond), np.ackedCount()-acked, sk.commitCount()-commits)
			}
			time.Sleep(50 * time.Millisecond)
		}
		before := sk.knownOffsets()
		if fedAtFirst < 0 {
			fedAtFirst = kc.fed.Load()
		}
		if pause {
			if err := writer.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, writer.cmd.Process.Pid)
		} else {
			writer.kill()
		}
		stopped := np.markSent() // the writer is gone or frozen: nothing sent from now on reaches it
		servedIn := waitLeads(t, standby, ids[standby], 30*time.Second)
		// At once, before the sink commits on the new writer: the offsets the restore brought
		// back.
		cl, err := kgo.NewClient(kgo.SeedBrokers(standby.addr()))
		if err != nil {
			t.Fatal(err)
		}
		checkGroupResumed(t, ctx, kadm.NewClient(cl), group, in, before, fmt.Sprintf("takeover %d", k))
		cl.Close()
		if pause {
			// Resumed once the standby serves: the node finds itself fenced at its next
			// renewal, stops serving and re-executes itself as a standby, by itself. Its
			// clients' requests frozen in flight with it are answered meanwhile; a client that
			// knows only its address produces one record through it at once.
			resumed, pid := writer.logSize(), writer.cmd.Process.Pid
			if err := writer.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			resumedAt := time.Now()
			v := fmt.Sprintf("through-fenced-%d", k)
			probes[v] = produceThrough(ctx, writer.addr(), side, 1, v)
			t.Logf("takeover %d: a record produced through the resumed node %d: acknowledged %v", k, ids[writer], probes[v])
			waitFor(t, 60*time.Second, "the fenced node re-executes itself", func() bool { return writer.loggedSince(resumed, "fenced: starting again as a standby") })
			writer.waitStandingBy(resumed)
			back := time.Since(resumedAt)
			t.Logf("takeover %d: the fenced node %d stands by again %v after its resume", k, ids[writer], back.Round(time.Millisecond))
			// The bound: its next renewal (a third of the lease), its stop, which has nothing
			// to finish (nothing it does can be acknowledged), its new start.
			if limit := 10 * time.Second; back > limit {
				t.Errorf("takeover %d: the fenced node stood by again %v after its resume, want at most %v", k, back, limit)
			}
			if !writer.running() || writer.cmd.Process.Pid != pid {
				t.Fatalf("takeover %d: the fenced node exited rather than re-executing itself", k)
			}
		}
		waitFor(t, 30*time.Second, "a record sent after the stop acknowledged", func() bool { return !np.firstAckSince().IsZero() })
		producedIn := np.firstAckSince().Sub(stopped)
		serving, producing = append(serving, servedIn), append(producing, producedIn)
		t.Logf("takeover %d after %s at %v: node %d serving %v after the %s, the first record sent after it acknowledged %v after it",
			k, how, stopped.Sub(began).Round(time.Millisecond), ids[standby], servedIn.Round(time.Millisecond), how, producedIn.Round(time.Millisecond))
		// The bound: the lease unrenewed (1 s), the standby's look at it (a second at most),
		// the restore, and slack for a loaded machine.
		if limit := 15 * time.Second; servedIn > limit {
			t.Errorf("takeover %d: the standby served %v after the %s, want at most %v", k, servedIn, how, limit)
		}
		writer, standby = standby, writer
		if !pause {
			standby.standBy() // the killed node, started again with its own flags
		}
		standby.waitRelays(t, ids, ids[writer], in)
		since = time.Now()
	}

	delivered, failed := kc.finish(t)
	np.finish(t, ctx)
	cl, err := kgo.NewClient(kgo.SeedBrokers(writer.addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	total, aborted := checkSinkExactlyOnce(t, ctx, cl, writer.addr(), np, sk, stopSink, partitions)
	t.Logf("output: read_committed reads each of the %d inputs exactly once across %d takeovers; read_uncommitted reads %d records more, of aborted transactions",
		total, takeovers, aborted)

	// side: an end record closes each partition, and everything before it is read.
	for p := int32(0); p < 2; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: side, Partition: p, Value: []byte("end")}).FirstErr(); err != nil {
			t.Fatalf("the end record of %s/%d: %v", side, p, err)
		}
	}
	sides := readUntilEnd(t, ctx, writer.addr(), side, 2, kgo.ReadUncommitted())
	fed := kc.fed.Load()
	if failed > 0 || int64(len(delivered)) != fed {
		t.Errorf("kcat: %d lines written, %d reported delivered, %d failed", fed, len(delivered), failed)
	}
	for i, v := range sides[0] {
		if want := kcatLine(int64(i)); v != want {
			t.Fatalf("%s/0: record %d is %q, want %q (a line lost, or stored twice)", side, i, v, want)
		}
	}
	if int64(len(sides[0])) != fed {
		t.Errorf("%s/0: kcat wrote %d lines, %d are read", side, fed, len(sides[0]))
	}
	for _, o := range delivered {
		if o >= int64(len(sides[0])) {
			t.Errorf("kcat reported offset %d delivered; %s/0 ends at %d", o, side, len(sides[0]))
		}
	}
	if fed <= fedAtFirst {
		t.Errorf("kcat wrote no line after the first takeover's signal (%d before, %d in all)", fedAtFirst, fed)
	}
	t.Logf("kcat: %d lines delivered, %d of them written after the first takeover's signal, each read once in order", len(delivered), fed-fedAtFirst)
	read := map[string]int{}
	for _, v := range sides[1] {
		read[v]++
	}
	for v, ok := range probes {
		switch {
		case read[v] > 1:
			t.Errorf("%q, produced through a fenced node, is read %d times", v, read[v])
		case ok && read[v] == 0:
			t.Errorf("%q was acknowledged through a fenced node but is not served", v)
		case !ok && read[v] == 1:
			t.Errorf("%q was not acknowledged through a fenced node but is served", v)
		}
	}

	t.Logf("failover summary, %d takeovers after %s: standby serving after median %v, worst %v; first record sent after the %s acknowledged after median %v, worst %v",
		takeovers, how, median(serving).Round(time.Millisecond), slices.Max(serving).Round(time.Millisecond),
		how, median(producing).Round(time.Millisecond), slices.Max(producing).Round(time.Millisecond))
}

// waitLeads waits until the node at n's address answers Metadata naming itself, node id, as
// the controller (the writer of its prefix, serving), polling every 20 ms, and returns how
// long it waited.
func waitLeads(t *testing.T, n *inlet, id int32, timeout time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		if resp, err := metadataOf(n.addr(), 500*time.Millisecond); err == nil && resp.ControllerID == id {
			return time.Since(began)
		}
		if time.Since(began) > timeout {
			t.Fatalf("node %d did not serve as the writer within %v", id, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRelays waits up to 10 s until the standby n answers Metadata as the writer's relay:
// every node of ids at its address, the writer the controller and, with a topic, the leader
// of each of its partitions. The standby asks the other nodes for the writer (at most once a
// second) and gives up on one after 2 s.
func (n *inlet) waitRelays(t *testing.T, ids map[*inlet]int32, writer int32, topic string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := metadataOf(n.addr(), 3*time.Second)
		if last = relayed(resp, err, ids, writer, topic); last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby at %s does not relay the writer's Metadata (node %d): %s", n.addr(), writer, last)
		}
	}
}

// relayed is what is wrong with a standby's Metadata answer (see waitRelays), or "".
func relayed(resp *kmsg.MetadataResponse, err error, ids map[*inlet]int32, writer int32, topic string) string {
	if err != nil {
		return err.Error()
	}
	if resp.ControllerID != writer {
		return fmt.Sprintf("controller %d", resp.ControllerID)
	}
	if len(resp.Brokers) != len(ids) {
		return fmt.Sprintf("%d brokers, want %d", len(resp.Brokers), len(ids))
	}
	for n, id := range ids {
		if !slices.ContainsFunc(resp.Brokers, func(b kmsg.MetadataResponseBroker) bool {
			return b.NodeID == id && net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) == n.addr()
		}) {
			return fmt.Sprintf("node %d at %s not listed: %+v", id, n.addr(), resp.Brokers)
		}
	}
	if topic == "" {
		return ""
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		if len(rt.Partitions) == 0 {
			return fmt.Sprintf("%s: no partitions (error %d)", topic, rt.ErrorCode)
		}
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 || p.Leader != writer {
				return fmt.Sprintf("%s/%d: leader %d, error %d", topic, p.Partition, p.Leader, p.ErrorCode)
			}
		}
		return ""
	}
	return topic + " not listed"
}

// metadataOf is the answer of the node at addr, itself and not another it names, to a Metadata
// request for every topic.
func metadataOf(addr string, timeout time.Duration) (*kmsg.MetadataResponse, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err // at once, while nothing listens there
	}
	c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// waitStopped waits until the process is stopped (its state in /proc is T).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: comm may hold spaces, not a ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && strings.HasPrefix(string(b[i+1:]), " T") {
			return
		}
	}
	t.Fatalf("pid %d not stopped 2 s after SIGSTOP", pid)
}

// produceThrough produces v to topic's partition p through a client that knows only addr, and
// reports whether it was acknowledged within 5 s.
func produceThrough(ctx context.Context, addr, topic string, p int32, v string) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		return false
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr() == nil
}

// median of ds (not empty): the middle one, or the mean of the two in the middle.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// kcatProducer is one kcat -P process writing kcatLine(0), kcatLine(1), ... to one partition,
// a line every 20 ms, through librdkafka's idempotent producer with acks=all, until finish;
// its delivery reports (-v -v) are in its log.
type kcatProducer struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	logPath string
	fed     atomic.Int64 // lines written to kcat
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	offsets []int64
	failed  int
}

func kcatLine(i int64) string { return fmt.Sprintf("kcat-%06d", i) }

func startKcat(t *testing.T, ctx context.Context, kcat, brokers, topic string, p int32) *kcatProducer {
	t.Helper()
	kp := &kcatProducer{logPath: filepath.Join(t.TempDir(), "kcat.log"), stop: make(chan struct{}), done: make(chan struct{})}
	logf, err := os.Create(kp.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// message.timeout.ms: a line waits for a new writer for up to 2 minutes (librdkafka's
	// default is 5), well beyond a takeover. -E: while no node listens (the writer gone, the
	// standby not serving yet) librdkafka reports all brokers down, which kcat otherwise
	// exits on, although librdkafka goes on trying them.
	kp.cmd = exec.CommandContext(ctx, kcat, "-P", "-E", "-b", brokers, "-t", topic, "-p", strconv.Itoa(int(p)),
		"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "message.timeout.ms=120000", "-X", "linger.ms=5", "-v", "-v")
	kp.cmd.Stdout, kp.cmd.Stderr = logf, logf
	if kp.stdin, err = kp.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := kp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(kp.done)
		for i := int64(0); ; i++ {
			select {
			case <-kp.stop:
				return
			default:
			}
			if _, err := io.WriteString(kp.stdin, kcatLine(i)+"\n"); err != nil {
				return // kcat exited: finish reports it
			}
			kp.fed.Store(i + 1)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return kp
}

// kcatDelivered is kcat's delivery report line (kcat.c dr_msg_cb, at verbosity 3).
var kcatDelivered = regexp.MustCompile(`Message delivered to partition \d+ \(offset (\d+)\)`)

// finish stops writing, closes kcat's input and waits for it to exit (it flushes what it
// holds first), and returns the offsets it reported delivered and how many lines it reported
// failed. Only the first call waits; the others return the same.
func (kp *kcatProducer) finish(t *testing.T) (offsets []int64, failed int) {
	t.Helper()
	kp.once.Do(func() {
		close(kp.stop)
		<-kp.done
		kp.stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- kp.cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-time.After(150 * time.Second):
			_ = kp.cmd.Process.Kill()
			err = errors.Join(errors.New("still running 150 s after its input closed"), <-exited)
		}
		f, ferr := os.Open(kp.logPath)
		if ferr != nil {
			t.Error(ferr)
			return
		}
		defer f.Close()
		var tail []string
		for sc := bufio.NewScanner(f); sc.Scan(); {
			line := sc.Text()
			if m := kcatDelivered.FindStringSubmatch(line); m != nil {
				o, _ := strconv.ParseInt(m[1], 10, 64)
				kp.offsets = append(kp.offsets, o)
				continue
			}
			if strings.Contains(line, "Delivery failed") {
				kp.failed++
			}
			if tail = append(tail, line); len(tail) > 20 {
				tail = tail[1:]
			}
		}
		if err != nil {
			t.Errorf("kcat: %v; the last lines of its log but delivery reports:\n%s", err, strings.Join(tail, "\n"))
		}
	})
	return kp.offsets, kp.failed
}
