package crashtest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/objstore"
)

// TestKill9DuringUploadAndReclaimLosesNothing: a node with a remote tier on versitygw is
// SIGKILLed again and again while idempotent producers write to a tiered topic whose local
// bound is small, so that kills land in uploads, in the recording of objects and in local
// reclaims. After the last restart every acknowledged record is read once, in order, from
// offset 0 across both tiers, and the bucket holds each partition's objects as one chain
// (no object overlapping another: an orphan of a cut upload would), once the tier's first
// clean after the restart has run. Then the disk is lost, and a node rebuilt from the bucket
// serves every record that was uploaded.
func TestKill9DuringUploadAndReclaimLosesNothing(t *testing.T) {
	s3 := versityEnv(t)
	n := startInlet(t, "--s3-bucket", s3.Bucket, "--s3-endpoint", s3.Endpoint, "--s3-path-style", "--s3-prefix", "crash/",
		"--remote-object-bytes", "128KiB", "--remote-upload-interval-ms", "200", "--log-retention-check-interval-ms", "200",
		"--bucket-lease-ms", "1000") // each restart after a SIGKILL waits one lease for its own old one

	const topic, partitions = "tiered", 2
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(admin).CreateTopic(ctx, partitions, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"), "local.retention.bytes": kadm.StringPtr("262144")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}

	np := startNumberedProducers(t, ctx, n.addr(), topic, partitions, 100*time.Second)
	for k := 1; k <= 4; k++ {
		time.Sleep(1500 * time.Millisecond)
		n.kill()
		time.Sleep(200 * time.Millisecond)
		n.restart()
	}
	time.Sleep(time.Second)
	np.finish(t, ctx)

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := int32(0); p < partitions; p++ {
		hw, local := listOffsets(t, ctx, cl, topic, p)
		waitFor(t, 30*time.Second, fmt.Sprintf("partition %d tiered and trimmed", p), func() bool {
			_, local = listOffsets(t, ctx, cl, topic, p)
			return local > hw/4
		})
		got := readPartition(t, ctx, n.addr(), topic, p, hw)
		want := np.check(t, p, got)
		t.Logf("partition %d: %d acknowledged, %d read from 0 to %d, local start %d", p, want, len(got), hw, local)
	}

	locals := make([]int64, partitions)
	for p := int32(0); p < partitions; p++ {
		_, locals[p] = listOffsets(t, ctx, cl, topic, p)
	}
	cl.Close()

	// The chain of objects: the clean after the last restart ran first in the tier's first
	// pass, before its uploads; a pass later the bucket is as the manifest says.
	time.Sleep(time.Second)
	bucket, err := objstore.OpenS3(ctx, s3.Config("crash/"))
	if err != nil {
		t.Fatal(err)
	}
	chains := map[string][][2]int64{}
	err = bucket.List(ctx, "", func(key string, _ int64) error {
		parts := strings.Split(key, "/")
		if len(parts) != 4 {
			return nil
		}
		be := strings.Split(parts[3], "-")
		base, _ := strconv.ParseInt(be[0], 10, 64)
		end, _ := strconv.ParseInt(be[1], 10, 64)
		chains[parts[2]] = append(chains[parts[2]], [2]int64{base, end})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range chains {
		sort.Slice(c, func(i, j int) bool { return c[i][0] < c[j][0] })
		for i := 1; i < len(c); i++ {
			if c[i][0] != c[i-1][1] {
				t.Errorf("partition %s: object %d..%d follows %d..%d: an orphan or a gap", p, c[i][0], c[i][1], c[i-1][0], c[i-1][1])
			}
		}
		if len(c) == 0 || c[0][0] != 0 {
			t.Errorf("partition %s: objects %v do not start at 0", p, c)
		}
	}
	if len(chains) != partitions {
		t.Errorf("objects of %d partitions, want %d", len(chains), partitions)
	}

	// The disk is lost: a node rebuilt from the bucket serves every record below each
	// partition's old local start (all of it was uploaded) from offset 0, in order, once.
	n.kill()
	if err := os.RemoveAll(n.dir); err != nil {
		t.Fatal(err)
	}
	n.args = append(n.args, "--restore-from-remote")
	n.restart()
	rc, err := kgo.NewClient(kgo.SeedBrokers(n.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for p := int32(0); p < partitions; p++ {
		hw, local := listOffsets(t, ctx, rc, topic, p)
		if hw < locals[p] || local != hw {
			t.Fatalf("partition %d restored with high watermark %d, local start %d; the old local start was %d", p, hw, local, locals[p])
		}
		got := readPartition(t, ctx, n.addr(), topic, p, hw)
		for i, num := range got {
			if num != i {
				t.Fatalf("restored partition %d: record %d is number %d", p, i, num)
			}
		}
		t.Logf("restored partition %d: %d records from the bucket (old local start %d)", p, len(got), locals[p])
		locals[p] = hw
	}
	// The flag left set: a restart keeps what the node has, restoring nothing over it.
	n.kill()
	n.restart()
	if !n.logged("nothing restored") {
		t.Error("a restart with --restore-from-remote on a data directory with topics did not say it restored nothing")
	}
	for p := int32(0); p < partitions; p++ {
		if hw, _ := listOffsets(t, ctx, rc, topic, p); hw != locals[p] {
			t.Errorf("partition %d: high watermark %d after a restart, %d before", p, hw, locals[p])
		}
	}
}

// listOffsets is p's high watermark and local log start (ListOffsets -1 and -4).
func listOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32) (hw, local int64) {
	t.Helper()
	get := func(ts int64) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
			t.Fatalf("ListOffsets %d: error %d", ts, ec)
		}
		return resp.Topics[0].Partitions[0].Offset
	}
	return get(-1), get(-4)
}

// readPartition reads p from offset 0 below hw and returns the record numbers in order.
func readPartition(t *testing.T, ctx context.Context, addr, topic string, p int32, hw int64) []int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxPartitionBytes(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []int
	last := int64(-1)
	for last < hw-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("partition %d: read up to %d of %d: %v", p, last, hw, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("partition %d: offset %d after %d", p, r.Offset, last)
			}
			last = r.Offset
			num, err := strconv.Atoi(string(r.Value[:9]))
			if err != nil {
				t.Fatalf("offset %d: %q", r.Offset, r.Value)
			}
			out = append(out, num)
		})
	}
	return out
}
