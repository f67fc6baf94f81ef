package e2e

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// kcatMember is one `kcat -G` process: the records it prints (partition and value) arrive on
// a channel.
type kcatMember struct {
	cmd  *exec.Cmd
	recs chan [2]string
	errb *strings.Builder
	mu   sync.Mutex
}

func startKcatMember(t *testing.T, kcat, addr, group, topic string) *kcatMember {
	t.Helper()
	m := &kcatMember{recs: make(chan [2]string, 10000), errb: &strings.Builder{}}
	m.cmd = exec.Command(kcat, "-u", "-b", addr, "-G", group, "-o", "beginning", "-f", `%p %s\n`,
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", "-X", "auto.commit.interval.ms=200",
		"-X", "topic.metadata.refresh.interval.ms=1000", topic)
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := m.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.cmd.Process.Kill(); _ = m.cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p, v, _ := strings.Cut(sc.Text(), " ")
			m.recs <- [2]string{p, v}
		}
	}()
	go func() {
		b, _ := io.ReadAll(errp)
		m.mu.Lock()
		m.errb.Write(b)
		m.mu.Unlock()
	}()
	return m
}

// drain collects what the member printed until quiet for the given time.
func (m *kcatMember) drain(quiet time.Duration) [][2]string {
	var out [][2]string
	for {
		select {
		case r := <-m.recs:
			out = append(out, r)
		case <-time.After(quiet):
			return out
		}
	}
}

// TestKcatGroupMembersShareAndRebalance guards librdkafka's balanced consumer against the
// group coordinator: two `kcat -G` members split a topic's partitions between them, and when
// one leaves (SIGTERM: it sends LeaveGroup) the other takes every partition over.
func TestKcatGroupMembersShareAndRebalance(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not on PATH (Debian package kcat; CI installs it)")
	}
	b := startBroker(t, nil)
	const topic, group = "kcat-group", "kcat-g"
	b.createTopic(topic, 4)
	produceN(t, b.addr, topic, 40, "phase1")

	a := startKcatMember(t, kcat, b.addr, group, topic)
	got := 0
	deadline := time.After(30 * time.Second)
	for got < 40 {
		select {
		case <-a.recs:
			got++
		case <-deadline:
			t.Fatalf("first member consumed %d of 40 records", got)
		}
	}

	// A second member joins: after the rebalance each partition belongs to one of them.
	bm := startKcatMember(t, kcat, b.addr, group, topic)
	deadline = time.After(40 * time.Second)
	for joined := false; !joined; {
		produceN(t, b.addr, topic, 8, "probe")
		select {
		case <-bm.recs:
			joined = true
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("second member never received records; kcat said:\n%s", bm.stderr())
		}
	}
	time.Sleep(time.Second)
	a.drain(500 * time.Millisecond)
	bm.drain(10 * time.Millisecond)
	produceN(t, b.addr, topic, 40, "phase2")
	pa := partitionsOf(a.drain(2*time.Second), "phase2")
	pb := partitionsOf(bm.drain(500*time.Millisecond), "phase2")
	if len(pa) == 0 || len(pb) == 0 || len(pa)+len(pb) != 4 {
		t.Fatalf("after the rebalance member A read partitions %v and B %v; want the 4 partitions split between them", pa, pb)
	}
	for p := range pa {
		if pb[p] {
			t.Fatalf("partition %s went to both members", p)
		}
	}

	// B leaves; A takes everything over.
	_ = bm.cmd.Process.Signal(syscall.SIGTERM)
	_ = bm.cmd.Wait()
	deadline = time.After(40 * time.Second)
	seen := map[string]bool{}
	for len(seen) < 4 {
		produceN(t, b.addr, topic, 8, "phase3")
		for p := range partitionsOf(a.drain(time.Second), "phase3") {
			seen[p] = true
		}
		select {
		case <-deadline:
			t.Fatalf("after B left, A reads only partitions %v; kcat said:\n%s", seen, a.stderr())
		default:
		}
	}
}

func (m *kcatMember) stderr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errb.String()
}

func partitionsOf(recs [][2]string, tag string) map[string]bool {
	out := map[string]bool{}
	for _, r := range recs {
		if strings.HasPrefix(r[1], tag+"-") {
			out[r[0]] = true
		}
	}
	return out
}

// saramaHandler counts records and marks each one for commit.
type saramaHandler struct {
	mu   sync.Mutex
	vals []string
	got  chan struct{}
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.vals = append(h.vals, string(m.Value))
		h.mu.Unlock()
		s.MarkMessage(m, "")
		select {
		case h.got <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h *saramaHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.vals)
}

// runSaramaGroup consumes with a sarama consumer group until want records arrived, then
// closes it (committing what was marked).
func runSaramaGroup(t *testing.T, addr, group, topic string, want int) []string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &saramaHandler{got: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	deadline := time.After(40 * time.Second)
	for h.count() < want {
		select {
		case <-h.got:
		case <-time.After(100 * time.Millisecond):
		case err := <-done:
			t.Fatalf("sarama group: %v", err)
		case <-deadline:
			cancel()
			t.Fatalf("sarama group consumed %d of %d", h.count(), want)
		}
	}
	cancel()
	<-done
	if err := cg.Close(); err != nil {
		t.Fatalf("close sarama group: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.vals
}

// TestSaramaConsumerGroupCommitsAndResumes guards sarama's consumer group (JoinGroup with its
// own range assignor, OffsetCommit v7 via its Kafka version): everything is consumed once,
// and a second session of the group starts after the committed offsets.
func TestSaramaConsumerGroupCommitsAndResumes(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "sarama-group"
	b.createTopic(topic, 3)
	produceN(t, b.addr, topic, 30, "one")
	if got := runSaramaGroup(t, b.addr, "sarama-g", topic, 30); len(got) < 30 {
		t.Fatalf("consumed %d", len(got))
	}
	produceN(t, b.addr, topic, 6, "two")
	for _, v := range runSaramaGroup(t, b.addr, "sarama-g", topic, 6) {
		if !strings.HasPrefix(v, "two-") {
			t.Fatalf("second session reread %q: the committed offsets were not used", v)
		}
	}
}

// TestConfluentConsumerGroupCommitsAndResumes guards librdkafka's high-level consumer through
// confluent-kafka-go: subscribe, consume everything, commit synchronously, and resume after
// the commit in a new consumer of the same group.
func TestConfluentConsumerGroupCommitsAndResumes(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "confluent-group"
	b.createTopic(topic, 3)
	produceN(t, b.addr, topic, 30, "one")
	consume := func(want int) []string {
		c, err := kafka.NewConsumer(&kafka.ConfigMap{
			"bootstrap.servers":  b.addr,
			"group.id":           "confluent-g",
			"auto.offset.reset":  "earliest",
			"enable.auto.commit": false,
			"session.timeout.ms": 6000,
			"log_level":          3,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Subscribe(topic, nil); err != nil {
			t.Fatal(err)
		}
		var vals []string
		deadline := time.Now().Add(40 * time.Second)
		for len(vals) < want && time.Now().Before(deadline) {
			ev := c.Poll(200)
			switch e := ev.(type) {
			case *kafka.Message:
				vals = append(vals, string(e.Value))
			case kafka.Error:
				if e.IsFatal() {
					t.Fatalf("consumer: %v", e)
				}
			}
		}
		if len(vals) < want {
			t.Fatalf("confluent consumer read %d of %d", len(vals), want)
		}
		if _, err := c.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		return vals
	}
	consume(30)
	produceN(t, b.addr, topic, 6, "two")
	for _, v := range consume(6) {
		if !strings.HasPrefix(v, "two-") {
			t.Fatalf("second consumer reread %q", v)
		}
	}
}
