package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics created by the harness with a target's topic configs (proc.Target.TopicConfigs), and
// the wait of the consume phase for a tiered topic to have left the node: a catch-up read of
// such a topic is then a read of the remote tier alone.

// adminTimeout bounds one admin exchange with a broker (create, list).
const adminTimeout = 30 * time.Second

// createTopic creates topic with partitions and configs on the broker at addr, so that
// loadgen finds it existing rather than creating it with the broker's defaults.
func createTopic(ctx context.Context, addr, topic string, partitions int, configs map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("inlet-bench-admin"))
	if err != nil {
		return err
	}
	defer cl.Close()
	cfg := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %q with %s: %w", topic, configText(configs), err)
	}
	return nil
}

// configText is configs as key=value,... in key order.
func configText(configs map[string]string) string {
	s := ""
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		if s != "" {
			s += ","
		}
		s += k + "=" + configs[k]
	}
	return s
}

// tiered reports whether configs make a topic tiered (Kafka's remote.storage.enable).
func tiered(configs map[string]string) bool {
	return configs["remote.storage.enable"] == "true"
}

// earliestLocal is ListOffsets' timestamp for the first offset on the broker's own disk
// (KIP-405's EARLIEST_LOCAL_TIMESTAMP, ListOffsets v8).
const earliestLocal = -4

// tierPollInterval is how often waitTiered lists the offsets.
const tierPollInterval = 250 * time.Millisecond

// waitTiered waits until every partition of every topic (name: partition count) has its local
// log start at its high watermark, that is, until the remote tier holds every batch and local
// retention has trimmed them all, and returns how long that took. It gives up after timeout.
func waitTiered(ctx context.Context, addr string, topics map[string]int, timeout time.Duration) (time.Duration, error) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("inlet-bench-admin"))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	for {
		left, err := localBacklog(ctx, cl, topics)
		if err == nil && left == 0 {
			return time.Since(began), nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d records still on local disk", left)
			}
			return time.Since(began), fmt.Errorf("not all in the remote tier after %v: %w", timeout, err)
		case <-time.After(tierPollInterval):
		}
	}
}

// localBacklog returns the records between local log start and high watermark, summed over
// every partition of topics.
func localBacklog(ctx context.Context, cl *kgo.Client, topics map[string]int) (int64, error) {
	local, err := listAt(ctx, cl, topics, earliestLocal)
	if err != nil {
		return 0, err
	}
	end, err := listAt(ctx, cl, topics, -1) // -1: the high watermark
	if err != nil {
		return 0, err
	}
	var left int64
	for k, l := range local {
		left += max(end[k]-l, 0)
	}
	return left, nil
}

// partitionKey names one partition of a topic.
type partitionKey struct {
	topic     string
	partition int32
}

// listAt lists the offset at timestamp ts (or one of ListOffsets' special timestamps) of every
// partition of topics.
func listAt(ctx context.Context, cl *kgo.Client, topics map[string]int, ts int64) (map[partitionKey]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = name
		for p := range topics[name] {
			pp := kmsg.NewListOffsetsRequestTopicPartition()
			pp.Partition, pp.Timestamp, pp.CurrentLeaderEpoch = int32(p), ts, -1
			t.Partitions = append(t.Partitions, pp)
		}
		req.Topics = append(req.Topics, t)
	}
	rctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return nil, err
	}
	return offsetsOf(req, resp)
}

// offsetsOf is the offset of every partition req asked for in resp; a partition missing or
// answered with an error is an error.
func offsetsOf(req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse) (map[partitionKey]int64, error) {
	got := map[partitionKey]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("list offsets of %s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
			}
			got[partitionKey{t.Topic, p.Partition}] = p.Offset
		}
	}
	out := make(map[partitionKey]int64, len(got))
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partitionKey{t.Topic, p.Partition}
			o, ok := got[k]
			if !ok {
				return nil, fmt.Errorf("list offsets: %s/%d not answered", k.topic, k.partition)
			}
			out[k] = o
		}
	}
	return out, nil
}

// TierSplit is where a tiered topic's records are: below the local log start only in the
// remote tier (moved there, and dropped from local disk by local retention), above it on
// local disk (uploaded or not), summed over the topic's partitions.
type TierSplit struct {
	RemoteOnlyRecords int64 `json:"remote_only_records"`
	LocalRecords      int64 `json:"local_records"`
}

// tierSplit lists the log start, local log start and high watermark of every partition of
// topic.
func tierSplit(ctx context.Context, addr, topic string, partitions int) (*TierSplit, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("inlet-bench-admin"))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	topics := map[string]int{topic: partitions}
	var at [3]map[partitionKey]int64
	for i, ts := range []int64{-2, earliestLocal, -1} { // earliest, earliest local, latest
		if at[i], err = listAt(ctx, cl, topics, ts); err != nil {
			return nil, err
		}
	}
	sp := &TierSplit{}
	for k, start := range at[0] {
		local := max(at[1][k], start)
		sp.RemoteOnlyRecords += local - start
		sp.LocalRecords += max(at[2][k]-local, 0)
	}
	return sp, nil
}
