package rebalance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Protocols measured.
const (
	// Classic is the classic group protocol (JoinGroup/SyncGroup) with franz-go's default
	// balancer, cooperative-sticky, and its default 3 s heartbeat interval.
	Classic = "classic"
	// Consumer is KIP-848's consumer protocol: franz-go opted in with kgo.ServerSideBalancer()
	// and its default balancer (cooperative-sticky, sent as the server assignor "uniform"); the
	// heartbeat interval is the broker's (Kafka's default 5 s).
	Consumer = "consumer"
)

// Protocols are the protocols in the order they are measured.
var Protocols = []string{Classic, Consumer}

// Shape is one run's group and load.
type Shape struct {
	Partitions int32 // of the one topic
	Members    int   // before the join; the join adds one
	// Rate is the records/s produced into each partition, spread evenly over time.
	Rate float64
	// Steady is the least time the group stays settled before the join; a draw from
	// [0, Jitter) is added so that the join falls at any point of the members' heartbeat
	// cycles.
	Steady, Jitter time.Duration
	// StartTimeout bounds the wait for the first members to settle, JoinTimeout the
	// rebalance.
	StartTimeout, JoinTimeout time.Duration
}

// Outcome is one run's measurement.
type Outcome struct {
	// Seconds is the time from the joining member's start to every partition consumed again
	// (Tracker); NaN when it did not settle.
	Seconds float64
	// StartSeconds is how long the first members took to settle from their start (the same
	// definition, from the creation of the first member's client).
	StartSeconds float64
	// Delay is the wait between the first members settling and the join.
	Delay time.Duration
	// GroupType is the group's type as ListGroups v5 reports it after the run ("classic",
	// "consumer"), or why it is unknown.
	GroupType string
	Owned     map[string][]int32
	Events    []Event // relative to the join
	Produced  uint64
	Err       error
}

// stampSize is the value's length: the nanoseconds since the run's base instant at which
// the record was handed to the producer.
const stampSize = 8

// Measure runs one measurement against the broker at addr: it creates topic with
// s.Partitions partitions, produces s.Rate records/s into each, starts s.Members members of
// group with protocol, waits until they have settled, waits s.Steady plus a draw from
// [0, s.Jitter) (rng), starts one more member, and measures until the group has settled
// again (Tracker). Every client is closed before it returns.
func Measure(ctx context.Context, addr, topic, group, protocol string, s Shape, rng *rand.Rand) (out Outcome) {
	out.Seconds = nanf()
	base := time.Now()
	clock := func() time.Duration { return time.Since(base) }

	if err := createTopic(ctx, addr, topic, s.Partitions); err != nil {
		out.Err = err
		return out
	}
	prodCtx, stopProducing := context.WithCancel(ctx)
	prodErr := make(chan error, 1)
	var produced uint64
	go func() { prodErr <- produce(prodCtx, addr, topic, s, base, &produced) }()
	defer func() {
		stopProducing()
		if err := <-prodErr; err != nil && out.Err == nil {
			out.Err = err
		}
		out.Produced = produced
	}()

	tr := NewTracker(s.Partitions)
	var members []*member
	defer func() {
		for _, m := range members {
			m.close()
		}
	}()
	start := func(name string) error {
		m, err := startMember(addr, topic, group, protocol, name, tr, clock)
		if err != nil {
			return err
		}
		members = append(members, m)
		return nil
	}

	t0 := clock()
	tr.Begin(t0)
	for i := range s.Members {
		if err := start(fmt.Sprintf("m%d", i+1)); err != nil {
			out.Err = err
			return out
		}
	}
	d, err := waitSettled(ctx, tr, s.Members, s.StartTimeout)
	if err != nil {
		out.Err = fmt.Errorf("the first %d members: %w (owned: %v)", s.Members, err, tr.Owned())
		return out
	}
	out.StartSeconds = d.Seconds()

	out.Delay = s.Steady
	if s.Jitter > 0 {
		out.Delay += time.Duration(rng.Int64N(int64(s.Jitter)))
	}
	if !sleep(ctx, out.Delay) {
		out.Err = ctx.Err()
		return out
	}
	if _, ok := tr.Settled(s.Members); !ok {
		out.Err = fmt.Errorf("the first %d members did not stay settled before the join (owned: %v)", s.Members, tr.Owned())
		return out
	}

	join := clock()
	tr.Begin(join)
	if err := start(fmt.Sprintf("m%d", s.Members+1)); err != nil {
		out.Err = err
		return out
	}
	d, err = waitSettled(ctx, tr, s.Members+1, s.JoinTimeout)
	for _, e := range tr.Events() {
		if e.At >= join {
			e.At -= join
			out.Events = append(out.Events, e)
		}
	}
	out.Owned = tr.Owned()
	out.GroupType = groupType(ctx, members[0].cl, group)
	if err != nil {
		out.Err = fmt.Errorf("after the join: %w", err)
		return out
	}
	out.Seconds = d.Seconds()
	for _, m := range members {
		if err := m.fetchErr(); err != nil {
			out.Err = fmt.Errorf("member %s: %w", m.name, err)
		}
	}
	return out
}

// waitSettled polls tr every 5 ms until members members have settled; the time it returns
// is the tracker's (from recorded instants), so the polling period does not enter it.
func waitSettled(ctx context.Context, tr *Tracker, members int, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for {
		if d, ok := tr.Settled(members); ok {
			return d, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("not settled within %v", timeout)
		}
		if !sleep(ctx, 5*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func createTopic(ctx context.Context, addr, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// produce sends s.Rate records/s to each partition until ctx ends, each value stamped with
// the nanoseconds since base at which it was handed to the client; the partitions are
// visited in turn, one record every 1/(s.Rate·partitions) s. Produce errors other than the
// end of ctx are returned.
func produce(ctx context.Context, addr, topic string, s Shape, base time.Time, produced *uint64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstErr error
	)
	every := time.Duration(float64(time.Second) / (s.Rate * float64(s.Partitions)))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := int32(0); ; i = (i + 1) % s.Partitions {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl.Flush(flushCtx)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			return firstErr
		case <-tick.C:
		}
		v := make([]byte, stampSize)
		binary.BigEndian.PutUint64(v, uint64(time.Since(base)))
		*produced++
		cl.Produce(ctx, &kgo.Record{Partition: i, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil && !errors.Is(err, context.Canceled) {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("produce: %w", err)
				}
				mu.Unlock()
			}
		})
	}
}

// member is one group member: a kgo client polling in a goroutine, reporting to the tracker.
type member struct {
	name string
	cl   *kgo.Client
	done chan struct{}
	mu   sync.Mutex
	err  error // the first fetch error
}

func startMember(addr, topic, group, protocol, name string, tr *Tracker, clock func() time.Duration) (*member, error) {
	m := &member{name: name, done: make(chan struct{})}
	parts := func(ps map[string][]int32) []int32 { return ps[topic] }
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ClientID("inlet-bench-rebalance-" + name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			tr.Assigned(name, parts(ps), clock())
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			tr.Revoked(name, parts(ps), clock(), "revoked")
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			tr.Revoked(name, parts(ps), clock(), "lost")
		}),
	}
	switch protocol {
	case Classic:
	case Consumer:
		opts = append(opts, kgo.ServerSideBalancer())
	default:
		return nil, fmt.Errorf("unknown protocol %q", protocol)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			now := clock()
			fs.EachError(func(t string, p int32, err error) {
				m.mu.Lock()
				if m.err == nil {
					m.err = fmt.Errorf("fetch %s/%d: %w", t, p, err)
				}
				m.mu.Unlock()
			})
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) == stampSize {
					tr.Delivered(name, r.Partition, time.Duration(binary.BigEndian.Uint64(r.Value)), now)
				}
			})
		}
	}()
	return m, nil
}

func (m *member) fetchErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// close leaves the group and stops the poll loop; bounded, since a broker that no longer
// answers must not hold the run.
func (m *member) close() {
	closed := make(chan struct{})
	go func() { m.cl.Close(); close(closed) }()
	select {
	case <-closed:
		<-m.done
	case <-time.After(10 * time.Second):
	}
}

// groupType is the type ListGroups (v5, KIP-848) reports for group, so that a run shows the
// protocol actually in effect (franz-go falls back to the classic protocol when the broker
// does not serve KIP-848).
func groupType(ctx context.Context, cl *kgo.Client, group string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "unknown: " + err.Error()
	}
	for _, g := range resp.Groups {
		if g.Group == group {
			if g.GroupType == "" {
				return "unknown: ListGroups v" + fmt.Sprint(resp.Version) + " has no group type"
			}
			return g.GroupType
		}
	}
	return "unknown: not listed"
}
