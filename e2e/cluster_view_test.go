package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

// clusterViewBroker starts node 1 of a two-node prefix (Config.Nodes: itself, listed at an
// address it must not use, and node 2 at a port nothing listens on) at leader epoch 7.
func clusterViewBroker(t *testing.T) (b *broker, other server.Node) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // node 2 stands by, or is down: connections to it are refused
	other = server.Node{ID: 2, Host: "127.0.0.1", Port: int32(port)}
	b = startBroker(t, func(c *server.Config) {
		c.NodeID = 1
		c.Nodes = []server.Node{{ID: 1, Host: "node1.invalid", Port: 1}, other}
		c.LeaderEpoch = func() int32 { return 7 }
	})
	return b, other
}

// TestMetadataListsEveryNodeAtTheLeaseEpoch: Metadata and DescribeCluster list this node at
// its advertised address (not its Nodes entry's) and every other node of Nodes at its own;
// this node is the controller and leads every partition, at the epoch LeaderEpoch gives.
func TestMetadataListsEveryNodeAtTheLeaseEpoch(t *testing.T) {
	b, other := clusterViewBroker(t)
	b.createTopic("view", 2)
	rc := dialRaw(t, b.addr)
	host, p, _ := net.SplitHostPort(b.addr)
	want := map[int32]string{1: net.JoinHostPort(host, p), 2: net.JoinHostPort(other.Host, strconv.Itoa(int(other.Port)))}

	for _, v := range []int16{0, 7, 12} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = v
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("view")
		md.Topics = append(md.Topics, mt)
		resp := rc.roundTrip(md).(*kmsg.MetadataResponse)
		got := map[int32]string{}
		for _, br := range resp.Brokers {
			got[br.NodeID] = net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
		}
		if len(got) != 2 || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("Metadata v%d brokers %v, want %v", v, got, want)
		}
		if v >= 1 && resp.ControllerID != 1 {
			t.Errorf("Metadata v%d controller %d, want 1", v, resp.ControllerID)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("Metadata v%d topics %+v", v, resp.Topics)
		}
		for _, mp := range resp.Topics[0].Partitions {
			wantEpoch := int32(7)
			if v < 7 {
				wantEpoch = -1 // LeaderEpoch is v7+: kmsg reads its default
			}
			if mp.Leader != 1 || mp.LeaderEpoch != wantEpoch || len(mp.Replicas) != 1 || mp.Replicas[0] != 1 || len(mp.ISR) != 1 || mp.ISR[0] != 1 {
				t.Errorf("Metadata v%d partition %d: leader %d epoch %d replicas %v isr %v; want 1, %d, [1], [1]",
					v, mp.Partition, mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR, wantEpoch)
			}
		}
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version = 1
	dresp := rc.roundTrip(dc).(*kmsg.DescribeClusterResponse)
	got := map[int32]string{}
	for _, br := range dresp.Brokers {
		got[br.NodeID] = net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
	}
	if dresp.ErrorCode != 0 || dresp.ControllerID != 1 || len(got) != 2 || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("DescribeCluster: error %d controller %d brokers %v; want 0, 1, %v", dresp.ErrorCode, dresp.ControllerID, got, want)
	}
}

// TestCurrentLeaderEpochIsChecked: KIP-320. Fetch, ListOffsets and OffsetForLeaderEpoch
// naming the current leader epoch 7 or none (-1) are served; an older one (6) is
// FENCED_LEADER_EPOCH, a newer one (8) UNKNOWN_LEADER_EPOCH.
func TestCurrentLeaderEpochIsChecked(t *testing.T) {
	b, _ := clusterViewBroker(t)
	b.createTopic("epoch7", 1)
	rc := dialRaw(t, b.addr)
	if p := rc.produceOne(9, "epoch7", 0, plainBatch(3, 1000, "r").encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: error %d", p.ErrorCode)
	}
	cases := []struct {
		current int32
		code    int16
	}{{-1, 0}, {7, 0}, {6, kerr.FencedLeaderEpoch.Code}, {8, kerr.UnknownLeaderEpoch.Code}}
	for _, c := range cases {
		fr := fetchReq(12, "epoch7", 0, 0, 0, 1, 1<<20, 1<<20)
		fr.Topics[0].Partitions[0].CurrentLeaderEpoch = c.current
		fp := fetchPartition(t, rc.roundTrip(fr))
		if fp.ErrorCode != c.code {
			t.Errorf("Fetch with current epoch %d: error %d, want %d", c.current, fp.ErrorCode, c.code)
		}
		if c.code == 0 && (fp.HighWatermark != 3 || len(fp.RecordBatches) == 0) {
			t.Errorf("Fetch with current epoch %d: high watermark %d, %d bytes; want 3 and the batch", c.current, fp.HighWatermark, len(fp.RecordBatches))
		}
		if c.code != 0 && (fp.HighWatermark != -1 || len(fp.RecordBatches) != 0) {
			t.Errorf("Fetch with current epoch %d: high watermark %d, %d bytes; want -1 and none", c.current, fp.HighWatermark, len(fp.RecordBatches))
		}

		lo := listOffsetsReq(7, "epoch7", 0, -1)
		lo.Topics[0].Partitions[0].CurrentLeaderEpoch = c.current
		lp := rc.roundTrip(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if lp.ErrorCode != c.code {
			t.Errorf("ListOffsets with current epoch %d: error %d, want %d", c.current, lp.ErrorCode, c.code)
		}
		if c.code == 0 && (lp.Offset != 3 || lp.LeaderEpoch != 7) {
			t.Errorf("ListOffsets with current epoch %d: offset %d epoch %d, want 3 and 7", c.current, lp.Offset, lp.LeaderEpoch)
		}

		oe := offsetForLeaderEpochReq("epoch7", 7, c.current)
		op := rc.roundTrip(oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if op.ErrorCode != c.code {
			t.Errorf("OffsetForLeaderEpoch with current epoch %d: error %d, want %d", c.current, op.ErrorCode, c.code)
		}
		if c.code == 0 && (op.LeaderEpoch != 7 || op.EndOffset != 3) {
			t.Errorf("OffsetForLeaderEpoch with current epoch %d: epoch %d end %d, want 7 and 3", c.current, op.LeaderEpoch, op.EndOffset)
		}
	}
	// Fetch v8 and ListOffsets v3 carry no current epoch: served whatever the epoch.
	if fp := fetchPartition(t, rc.roundTrip(fetchReq(8, "epoch7", 0, 0, 0, 1, 1<<20, 1<<20))); fp.ErrorCode != 0 {
		t.Errorf("Fetch v8: error %d", fp.ErrorCode)
	}

	// The end offset of a requested epoch: an earlier one ends at the high watermark (no
	// history is kept, and nothing below it was truncated), a later one is unknown.
	for _, c := range []struct {
		requested, epoch int32
		end              int64
	}{{0, 0, 3}, {6, 6, 3}, {7, 7, 3}, {8, -1, -1}} {
		op := rc.roundTrip(offsetForLeaderEpochReq("epoch7", c.requested, 7)).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if op.ErrorCode != 0 || op.LeaderEpoch != c.epoch || op.EndOffset != c.end {
			t.Errorf("OffsetForLeaderEpoch for epoch %d: error %d, epoch %d, end %d; want 0, %d, %d", c.requested, op.ErrorCode, op.LeaderEpoch, op.EndOffset, c.epoch, c.end)
		}
	}
}

func offsetForLeaderEpochReq(topic string, epoch, current int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestKgoAgainstATwoNodeClusterView: franz-go, which sends the leader epoch Metadata gave in
// every Fetch and ListOffsets, produces and consumes against a node that lists a second node
// nothing answers at.
func TestKgoAgainstATwoNodeClusterView(t *testing.T) {
	b, _ := clusterViewBroker(t)
	b.createTopic("kgoview", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newKgo(t, b.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*rec
	for i := range 20 {
		recs = append(recs, &rec{partition: int32(i % 2), key: []byte{byte(i)}, value: []byte("v" + strconv.Itoa(i))})
	}
	kgoProduce(ctx, t, cl, "kgoview", recs)
	got := kgoConsume(ctx, t, b.addr, "kgoview", 2, 20)
	seen := map[string]bool{}
	for _, g := range got {
		seen[string(g.value)] = true
	}
	if len(got) != 20 || len(seen) != 20 {
		t.Fatalf("consumed %d records (%d distinct), want 20", len(got), len(seen))
	}
}

// TestKcatAgainstATwoNodeClusterView: librdkafka produces and consumes against a node at
// leader epoch 7 whose batches carry epoch 0, listing a second node nothing answers at.
func TestKcatAgainstATwoNodeClusterView(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not on PATH (Debian package kcat; CI installs it)")
	}
	b, _ := clusterViewBroker(t)
	b.createTopic("kcatview", 1)
	var in bytes.Buffer
	for i := range 50 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := exec.CommandContext(ctx, kcat, "-P", "-b", b.addr, "-t", "kcatview", "-p", "0")
	prod.Stdin = bytes.NewReader(in.Bytes())
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	cons := exec.CommandContext(ctx, kcat, "-C", "-b", b.addr, "-t", "kcatview", "-p", "0", "-e", "-f", `%s\n`)
	var stdout, stderr bytes.Buffer
	cons.Stdout, cons.Stderr = &stdout, &stderr
	if err := cons.Run(); err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, stderr.Bytes())
	}
	if !bytes.Equal(stdout.Bytes(), in.Bytes()) {
		t.Fatalf("kcat -C returned %q, want the %d bytes produced", trunc(stdout.Bytes()), in.Len())
	}
}
