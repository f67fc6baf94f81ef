package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// topicReadyTimeout bounds the wait for a created topic to appear in metadata.
	topicReadyTimeout = 10 * time.Second
	// verifyStallTimeout ends a verification that has read nothing for this long.
	verifyStallTimeout = 30 * time.Second
)

// ensureTopic creates topic with partitions partitions unless it exists, and returns the
// partition count it has and how it came to be. Creating first, rather than asking metadata first, keeps a broker
// that auto-creates topics on metadata from creating it with its own default count.
// Replication factor 1: Inlet is a one-broker cluster. A broker that refuses CreateTopics (or
// does not implement it yet) gets a metadata request that allows auto-creation instead, and
// the topic has the broker's default partition count.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) (n int, how string, err error) {
	adm := kadm.NewClient(cl)
	var createErr error
	how = "existing"
	resps, err := adm.CreateTopics(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		resp, ok := resps[topic]
		switch {
		case !ok:
			err = errors.New("not in the response")
		case resp.Err == nil:
			how = "created"
		case errors.Is(resp.Err, kerr.TopicAlreadyExists):
		case resp.ErrMessage != "":
			err = fmt.Errorf("%w (%s)", resp.Err, resp.ErrMessage)
		default:
			err = resp.Err
		}
	}
	if err != nil {
		createErr = fmt.Errorf("create topic %q: %w", topic, err)
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = true
		if _, err := req.RequestWith(ctx, cl); err != nil {
			return 0, "", fmt.Errorf("%w; auto-creating it: %w", createErr, err)
		}
		how = fmt.Sprintf("auto-created or existing; %v", createErr)
	}

	deadline := time.Now().Add(topicReadyTimeout)
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			d := details[topic]
			if d.Err == nil && len(d.Partitions) > 0 {
				return len(d.Partitions), how, nil
			}
			err = d.Err
			if err == nil {
				err = errors.New("no partitions")
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if createErr != nil {
				err = fmt.Errorf("%w; then: %w", createErr, err)
			}
			return 0, "", fmt.Errorf("topic %q not ready: %w", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ensureTopics is ensureTopic for several topics at once: one CreateTopics request for all of
// them (or, refused, one Metadata request that allows auto-creation), then a wait until every
// topic has partitions. It returns their partition count, which must be the same for all: the
// figures of a run are per topic of that count.
func ensureTopics(ctx context.Context, cl *kgo.Client, topics []string, partitions int) (n int, how string, err error) {
	adm := kadm.NewClient(cl)
	var createErr error
	created, existing := 0, 0
	resps, err := adm.CreateTopics(ctx, int32(partitions), 1, nil, topics...)
	if err == nil {
		for _, topic := range topics {
			resp, ok := resps[topic]
			switch {
			case !ok:
				err = fmt.Errorf("%q not in the response", topic)
			case resp.Err == nil:
				created++
				continue
			case errors.Is(resp.Err, kerr.TopicAlreadyExists):
				existing++
				continue
			case resp.ErrMessage != "":
				err = fmt.Errorf("%q: %w (%s)", topic, resp.Err, resp.ErrMessage)
			default:
				err = fmt.Errorf("%q: %w", topic, resp.Err)
			}
			break
		}
	}
	how = fmt.Sprintf("%d created, %d existing", created, existing)
	if err != nil {
		createErr = fmt.Errorf("create %d topics: %w", len(topics), err)
		req := kmsg.NewPtrMetadataRequest()
		for _, topic := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
		}
		req.AllowAutoTopicCreation = true
		if _, err := req.RequestWith(ctx, cl); err != nil {
			return 0, "", fmt.Errorf("%w; auto-creating them: %w", createErr, err)
		}
		how = fmt.Sprintf("auto-created or existing; %v", createErr)
	}

	deadline := time.Now().Add(topicReadyTimeout)
	for {
		details, err := adm.ListTopics(ctx, topics...)
		if err == nil {
			n = 0
			for _, topic := range topics {
				d, ok := details[topic]
				switch {
				case !ok:
					err = fmt.Errorf("%q: not in metadata", topic)
				case d.Err != nil:
					err = fmt.Errorf("%q: %w", topic, d.Err)
				case len(d.Partitions) == 0:
					err = fmt.Errorf("%q: no partitions", topic)
				case n == 0:
					n = len(d.Partitions)
					continue
				case len(d.Partitions) != n:
					// Not worth a retry: an existing topic keeps its count.
					return 0, "", fmt.Errorf("topics %q and %q have %d and %d partitions; a run over several topics needs one count",
						topics[0], topic, n, len(d.Partitions))
				default:
					continue
				}
				break
			}
			if err == nil {
				return n, how, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if createErr != nil {
				err = fmt.Errorf("%w; then: %w", createErr, err)
			}
			return 0, "", fmt.Errorf("%d topics not ready: %w", len(topics), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string, partitions int) ([]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %q: %w", topic, err)
	}
	ends := make([]int64, partitions)
	for p := range ends {
		o, ok := listed.Lookup(topic, int32(p))
		if !ok {
			return nil, fmt.Errorf("list end offsets of %q: partition %d missing", topic, p)
		}
		ends[p] = o.Offset
	}
	return ends, nil
}

// readBack consumes the given offset ranges with a read_committed kgo consumer and calls observe
// for every record in them, in offset order per partition. Records outside a range are
// skipped: a range starts where this run's records start (the topic may hold older runs), and
// other writers may append past its end.
func readBack(ctx context.Context, brokers []string, topic string, ranges []PartitionRange,
	observe func(partition int32, offset int64, value []byte)) error {
	state := make(map[int32]*readProgress)
	offsets := make(map[int32]kgo.Offset)
	for _, r := range ranges {
		if r.End > r.Start {
			state[r.Partition] = &readProgress{next: r.Start, end: r.End}
			offsets[r.Partition] = kgo.NewOffset().At(r.Start)
		}
	}
	if len(state) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ClientID("inlet-loadgen-verify"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records take offsets too; seeing them lets a range that ends in a
		// transaction marker be completed.
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return err
	}
	defer cl.Close()

	remaining := len(state)
	lastProgress := time.Now()
	var lastErr error
	for remaining > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		fetches.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				lastErr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			st := state[fp.Partition]
			if st == nil {
				return
			}
			for _, rec := range fp.Records {
				if rec.Offset < st.next || rec.Offset >= st.end {
					continue
				}
				if !rec.Attrs.IsControl() {
					observe(fp.Partition, rec.Offset, rec.Value)
				}
				st.next = rec.Offset + 1
				lastProgress = time.Now()
				if st.next >= st.end {
					remaining--
				}
			}
		})
		if remaining > 0 && time.Since(lastProgress) > verifyStallTimeout {
			return stallError(unfinished(state), lastErr)
		}
	}
	return nil
}

// readProgress is one partition of a read back: offsets [next, end) are still to come.
type readProgress struct{ next, end int64 }

// unfinished lists the partitions that did not reach their end, as the ranges still to read.
func unfinished(state map[int32]*readProgress) []PartitionRange {
	var out []PartitionRange
	for p, st := range state {
		if st.next < st.end {
			out = append(out, PartitionRange{Partition: p, Start: st.next, End: st.end})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

func stallError(unfinished []PartitionRange, lastErr error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "read back stalled for %v; unfinished:", verifyStallTimeout)
	for i, r := range unfinished {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(unfinished)-i)
			break
		}
		fmt.Fprintf(&b, " partition %d at offset %d of %d;", r.Partition, r.Start, r.End)
	}
	if lastErr != nil {
		fmt.Fprintf(&b, " last fetch error: %v", lastErr)
	}
	return errors.New(b.String())
}
