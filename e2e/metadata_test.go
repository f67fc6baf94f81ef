package e2e

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func metadataReq(version int16, allowCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	req.AllowAutoTopicCreation = allowCreate
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	return req
}

func topicNames(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out = append(out, *t.Topic)
		}
	}
	sort.Strings(out)
	return out
}

// TestMetadataAnswersEachVersionsRules guards Metadata's version-dependent meanings: which
// request means "all topics" (v0: empty list; v1+: null), when auto-creation may happen
// (always before v4; v4+ only when asked), invalid names, and the one-broker cluster every
// partition is led by.
func TestMetadataAnswersEachVersionsRules(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("alpha", 2)
	b.createTopic("beta", 3)
	rc := dialRaw(t, b.addr)
	host, portStr, _ := net.SplitHostPort(b.addr)
	port, _ := strconv.Atoi(portStr)

	t.Run("v0 empty list is every topic", func(t *testing.T) {
		resp := rc.roundTrip(metadataReq(0, false, []string{}...)).(*kmsg.MetadataResponse)
		if got := topicNames(resp); fmt.Sprint(got) != "[alpha beta]" {
			t.Errorf("topics %v, want [alpha beta]", got)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].Host != host || resp.Brokers[0].Port != int32(port) {
			t.Errorf("brokers %+v, want one at %s", resp.Brokers, b.addr)
		}
	})
	t.Run("v1 null is every topic", func(t *testing.T) {
		resp := rc.roundTrip(metadataReq(1, false)).(*kmsg.MetadataResponse)
		if got := topicNames(resp); fmt.Sprint(got) != "[alpha beta]" {
			t.Errorf("topics %v, want [alpha beta]", got)
		}
	})
	t.Run("v1 empty list is no topic", func(t *testing.T) {
		resp := rc.roundTrip(metadataReq(1, false, []string{}...)).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 0 {
			t.Errorf("topics %v, want none", topicNames(resp))
		}
	})
	t.Run("partitions led by the one broker", func(t *testing.T) {
		resp := rc.roundTrip(metadataReq(9, false, "beta")).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("beta: %+v", resp.Topics)
		}
		node := resp.Brokers[0].NodeID
		if resp.ControllerID != node {
			t.Errorf("controller %d, broker %d", resp.ControllerID, node)
		}
		for i, p := range resp.Topics[0].Partitions {
			if p.Partition != int32(i) || p.Leader != node || fmt.Sprint(p.Replicas) != fmt.Sprint([]int32{node}) || fmt.Sprint(p.ISR) != fmt.Sprint([]int32{node}) {
				t.Errorf("partition %+v; want index %d led by %d, replicas and ISR [%d]", p, i, node, node)
			}
		}
	})

	cases := []struct {
		name        string
		version     int16
		allowCreate bool
		topic       string
		wantCode    int16
		wantCreated bool
	}{
		{"v4 unknown topic without auto-creation", 4, false, "no-create-v4", 3, false},
		{"v12 unknown topic without auto-creation", 12, false, "no-create-v12", 3, false},
		// The request that creates a topic is answered LEADER_NOT_AVAILABLE (5) without
		// partitions, as Kafka answers it; the next one lists them.
		{"v4 unknown topic with auto-creation", 4, true, "create-v4", 5, true},
		{"v1 auto-creates (no flag before v4)", 1, false, "create-v1", 5, true},
		{"v0 auto-creates", 0, false, "create-v0", 5, true},
		{"v4 invalid name", 4, true, "bad/name", 17, false},
		{"v1 invalid name", 1, false, "bad name", 17, false},
		{"v12 name of 250 characters", 12, true, string(make250()), 17, false},
		{"v12 name '..'", 12, true, "..", 17, false},
		{"v12 known topic without auto-creation", 12, false, "alpha", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, existed := b.blog.Topic(c.topic)
			resp := rc.roundTrip(metadataReq(c.version, c.allowCreate, c.topic)).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 {
				t.Fatalf("%d topics in the answer, want 1", len(resp.Topics))
			}
			mt := resp.Topics[0]
			if mt.Topic == nil || *mt.Topic != c.topic {
				t.Errorf("answer names %v", mt.Topic)
			}
			if mt.ErrorCode != c.wantCode {
				t.Errorf("error %d, want %d", mt.ErrorCode, c.wantCode)
			}
			_, exists := b.blog.Topic(c.topic)
			if created := exists && !existed; created != c.wantCreated {
				t.Errorf("topic created: %v, want %v", created, c.wantCreated)
			}
			if c.wantCode != 0 && len(mt.Partitions) != 0 {
				t.Errorf("error answer lists %d partitions", len(mt.Partitions))
			}
			if c.wantCreated {
				again := rc.roundTrip(metadataReq(c.version, c.allowCreate, c.topic)).(*kmsg.MetadataResponse).Topics[0]
				if again.ErrorCode != 0 || len(again.Partitions) != 4 {
					t.Errorf("asked again: error %d, %d partitions; want 0 and the default 4", again.ErrorCode, len(again.Partitions))
				}
			}
		})
	}
}

func make250() []byte {
	b := make([]byte, 250)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

// TestMetadataIdentityStableAcrossRestart guards the cluster's identity: v12 carries a
// 22-character cluster id and a topic id per topic, and both stay the same when the node
// restarts on its data directory (clients that cache topic ids, and KIP-516 consumers,
// depend on it).
func TestMetadataIdentityStableAcrossRestart(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("ident-a", 1)
	b.createTopic("ident-b", 2)
	read := func() (string, map[string][16]byte) {
		rc := dialRaw(t, b.addr)
		resp := rc.roundTrip(metadataReq(12, false)).(*kmsg.MetadataResponse)
		if resp.ClusterID == nil {
			t.Fatal("no cluster id")
		}
		ids := map[string][16]byte{}
		for _, mt := range resp.Topics {
			if mt.TopicID == ([16]byte{}) {
				t.Errorf("topic %s has the zero topic id", *mt.Topic)
			}
			ids[*mt.Topic] = mt.TopicID
		}
		return *resp.ClusterID, ids
	}
	cid, ids := read()
	if len(cid) != 22 {
		t.Errorf("cluster id %q has %d characters, want 22", cid, len(cid))
	}
	if len(ids) != 2 || ids["ident-a"] == ids["ident-b"] {
		t.Errorf("topic ids %v; want two distinct", ids)
	}
	b.restart()
	cid2, ids2 := read()
	if cid2 != cid {
		t.Errorf("cluster id %q after restart, was %q", cid2, cid)
	}
	if fmt.Sprint(ids2) != fmt.Sprint(ids) {
		t.Errorf("topic ids %v after restart, were %v", ids2, ids)
	}

	// A v12 lookup by topic id alone finds the topic; an unknown id is UNKNOWN_TOPIC_ID.
	rc := dialRaw(t, b.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, id := range [][16]byte{ids["ident-b"], {1, 2, 3}} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.TopicID = id
		req.Topics = append(req.Topics, mt)
	}
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics in the answer, want 2", len(resp.Topics))
	}
	if mt := resp.Topics[0]; mt.ErrorCode != 0 || mt.Topic == nil || *mt.Topic != "ident-b" || len(mt.Partitions) != 2 {
		t.Errorf("lookup by id: error %d, name %v, %d partitions; want ident-b with 2", mt.ErrorCode, mt.Topic, len(mt.Partitions))
	}
	if mt := resp.Topics[1]; mt.ErrorCode != 100 {
		t.Errorf("unknown id: error %d, want UNKNOWN_TOPIC_ID (100)", mt.ErrorCode)
	}
}

// TestAutoCreateAfterDeleteAnswersLeaderNotAvailable: a client that deletes a topic and checks
// it again with auto-creation on sees what Kafka shows: the request that recreates the topic
// is answered LEADER_NOT_AVAILABLE without partitions, the next one lists them (empty).
func TestAutoCreateAfterDeleteAnswersLeaderNotAvailable(t *testing.T) {
	b := startBroker(t, nil)
	rc := dialRaw(t, b.addr)
	md := func() kmsg.MetadataResponseTopic {
		return rc.roundTrip(metadataReq(12, true, "recreated")).(*kmsg.MetadataResponse).Topics[0]
	}
	if mt := md(); mt.ErrorCode != 5 || len(mt.Partitions) != 0 {
		t.Fatalf("creating request: error %d, %d partitions; want 5 and none", mt.ErrorCode, len(mt.Partitions))
	}
	if mt := md(); mt.ErrorCode != 0 || len(mt.Partitions) != 4 {
		t.Fatalf("next request: error %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
	}
	if p := rc.produceOne(9, "recreated", 0, plainBatch(1, 1000, "x").encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis = 6, 5000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("recreated")
	del.Topics = append(del.Topics, dt)
	if r := rc.roundTrip(del).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %d", r.Topics[0].ErrorCode)
	}
	if mt := md(); mt.ErrorCode != 5 || len(mt.Partitions) != 0 {
		t.Fatalf("recreating request: error %d, %d partitions; want 5 and none", mt.ErrorCode, len(mt.Partitions))
	}
	if mt := md(); mt.ErrorCode != 0 || len(mt.Partitions) != 4 {
		t.Fatalf("next request: error %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
	}
	if hw := b.highWatermark("recreated", 0); hw != 0 {
		t.Errorf("recreated topic has high watermark %d, want 0 (empty)", hw)
	}
}
