package crashtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxString is the longest string Kafka's protocol carries (0x7fff bytes: its generated
// readers refuse longer ones), and the limit Inlet checks names against (wire.MaxStringLength).
const maxString = 0x7fff

// dialRawAs is dialRaw with the given client id in every request header.
func dialRawAs(t *testing.T, addr, clientID string) *rawConn {
	rc := dialRaw(t, addr)
	rc.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	return rc
}

func long(c byte, n int) string { return strings.Repeat(string(c), n) }

// offsetCommit sends an OffsetCommit v8 (flexible: its strings may be longer than Kafka reads)
// of one partition and returns its error code.
func offsetCommit(rc *rawConn, group string, gen int32, member string, instance *string, topic string, offset int64, md string) int16 {
	rc.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation, req.MemberID, req.InstanceID = group, gen, member, instance
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = 0, offset, -1, &md
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.roundTrip(req).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("OffsetCommit answer of shape %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func offsetFetch(rc *rawConn, group, topic string) (int64, string) {
	rc.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(5)
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := rc.roundTrip(req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("OffsetFetch of a %d-byte group: %+v", len(group), resp)
	}
	p := resp.Topics[0].Partitions[0]
	md := ""
	if p.Metadata != nil {
		md = *p.Metadata
	}
	return p.Offset, md
}

// TestEveryNameAtItsLimitSurvivesRestarts: every string a client can leave in the node's state
// at its protocol maximum (32767 bytes: group ids, member and instance ids, the client id in
// the header, protocol names, transactional ids) or at the node's own limit (topic names 249,
// offset metadata 4096) is accepted, then the node restarts after SIGTERM and after SIGKILL,
// starts, serves, and gives everything back.
func TestEveryNameAtItsLimitSurvivesRestarts(t *testing.T) {
	n := startInlet(t)
	topic := long('t', 249)
	group, txnGroup, static := long('g', maxString), long('h', maxString), long('s', maxString)
	instance, proto := long('i', maxString), long('p', maxString)
	txnID, md := long('x', maxString), long('m', 4096)
	clientID := long('c', maxString)
	rc := dialRawAs(t, n.addr(), clientID)

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(4)
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = topic, 1, 1
	ct.Topics = append(ct.Topics, ctt)
	if r := rc.roundTrip(ct).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create a 249-byte topic: %d", r.Topics[0].ErrorCode)
	}
	if code := offsetCommit(rc, group, -1, "", nil, topic, 7, md); code != 0 {
		t.Fatalf("OffsetCommit of a %d-byte group id: %d", len(group), code)
	}

	// A static member with every string at the limit joins and syncs: its group's record holds
	// them all.
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.SetVersion(5)
	jr.Group, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = static, 30000, 30000
	jr.InstanceID, jr.ProtocolType = &instance, proto
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = proto, bytes.Repeat([]byte{0xff}, 64<<10)
	jr.Protocols = append(jr.Protocols, jp)
	join := rc.roundTrip(jr).(*kmsg.JoinGroupResponse)
	if join.ErrorCode != 0 || len(join.MemberID) > maxString || !strings.HasPrefix(join.MemberID, "ccc") {
		t.Fatalf("join: code %d, member id of %d bytes", join.ErrorCode, len(join.MemberID))
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.SetVersion(3)
	sr.Group, sr.Generation, sr.MemberID, sr.InstanceID = static, join.Generation, join.MemberID, &instance
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = join.MemberID, []byte("assigned")
	sr.GroupAssignment = append(sr.GroupAssignment, sa)
	if r := rc.roundTrip(sr).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("sync: %d", r.ErrorCode)
	}
	if code := offsetCommit(rc, static, join.Generation, join.MemberID, &instance, topic, 9, md); code != 0 {
		t.Fatalf("member's OffsetCommit: %d", code)
	}

	// A transaction with every name at the limit, left open.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(3)
	ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = &txnID, 600000, -1, -1
	init := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId of a %d-byte transactional id: %d", len(txnID), init.ErrorCode)
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.SetVersion(3)
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = txnID, init.ProducerID, init.ProducerEpoch
	apt := kmsg.NewAddPartitionsToTxnRequestTopic()
	apt.Topic, apt.Partitions = topic, []int32{0}
	ap.Topics = append(ap.Topics, apt)
	if r := rc.roundTrip(ap).(*kmsg.AddPartitionsToTxnResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.SetVersion(3)
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = txnID, init.ProducerID, init.ProducerEpoch, txnGroup
	if r := rc.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %d", r.ErrorCode)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.SetVersion(3)
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = txnID, txnGroup, init.ProducerID, init.ProducerEpoch, -1
	tct := kmsg.NewTxnOffsetCommitRequestTopic()
	tct.Topic = topic
	tcp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tcp.Partition, tcp.Offset, tcp.LeaderEpoch, tcp.Metadata = 0, 11, -1, &md
	tct.Partitions = append(tct.Partitions, tcp)
	tc.Topics = append(tc.Topics, tct)
	if r := rc.roundTrip(tc).(*kmsg.TxnOffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	rc.c.Close()

	check := func(when string) {
		t.Helper()
		rc := dialRawAs(t, n.addr(), clientID)
		if off, got := offsetFetch(rc, group, topic); off != 7 || got != md {
			t.Fatalf("%s: the long group's offset %d, metadata of %d bytes", when, off, len(got))
		}
		if off, _ := offsetFetch(rc, static, topic); off != 9 {
			t.Fatalf("%s: the static group's offset %d", when, off)
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.SetVersion(4)
		dg.Groups = []string{static}
		d := rc.roundTrip(dg).(*kmsg.DescribeGroupsResponse)
		if len(d.Groups) != 1 || d.Groups[0].State != "Stable" || len(d.Groups[0].Members) != 1 ||
			d.Groups[0].Members[0].ClientID != clientID || d.Groups[0].Members[0].InstanceID == nil || *d.Groups[0].Members[0].InstanceID != instance ||
			d.Groups[0].Protocol != proto || string(d.Groups[0].Members[0].MemberAssignment) != "assigned" {
			t.Fatalf("%s: the static group is not what it was", when)
		}
		dt := kmsg.NewPtrDescribeTransactionsRequest()
		dt.TransactionalIDs = []string{txnID}
		tr := rc.roundTrip(dt).(*kmsg.DescribeTransactionsResponse)
		if len(tr.TransactionStates) != 1 || tr.TransactionStates[0].ErrorCode != 0 || tr.TransactionStates[0].State != "Ongoing" ||
			tr.TransactionStates[0].ProducerID != init.ProducerID {
			t.Fatalf("%s: the transaction: %+v", when, tr.TransactionStates)
		}
		// And the node serves: a kgo producer and consumer on the 249-byte topic.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.ConsumeTopics(topic))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(when)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", when, err)
		}
		for seen := false; !seen; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s: the record produced was not consumed", when)
			}
			fs.EachRecord(func(r *kgo.Record) { seen = seen || string(r.Value) == when })
		}
	}
	check("before a restart")
	if st, _ := n.terminate(30 * time.Second); st == nil || !st.Success() {
		t.Fatalf("SIGTERM: %v", st)
	}
	n.restart()
	check("after SIGTERM")
	n.kill()
	n.restart()
	check("after SIGKILL")
}

// TestOverlongNamesAreRefused: a group id or transactional id longer than Kafka's protocol
// carries (70,000 bytes in flexible versions, which kmsg reads) is refused with
// INVALID_GROUP_ID (OffsetCommit, JoinGroup) or INVALID_REQUEST (InitProducerId), and the node
// restarts after SIGTERM. Before the check, the OffsetCommit was answered NONE and wrote a key
// whose u16 length had wrapped: every later start failed.
func TestOverlongNamesAreRefused(t *testing.T) {
	n := startInlet(t)
	rc := dialRaw(t, n.addr())
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(4)
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "t", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	rc.roundTrip(ct)
	over := long('g', 70000)
	for _, g := range []string{over, long('g', maxString+1), "g\xff"} {
		if code := offsetCommit(rc, g, -1, "", nil, "t", 1, ""); code != 24 {
			t.Errorf("OffsetCommit of a %d-byte group id: code %d, want INVALID_GROUP_ID (24)", len(g), code)
		}
	}
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.SetVersion(6) // flexible
	jr.Group, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis, jr.ProtocolType = over, 30000, 30000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jr.Protocols = append(jr.Protocols, jp)
	if r := rc.roundTrip(jr).(*kmsg.JoinGroupResponse); r.ErrorCode != 24 {
		t.Errorf("JoinGroup of a 70,000-byte group id: code %d, want INVALID_GROUP_ID (24)", r.ErrorCode)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(3) // flexible
	txnID := long('x', 70000)
	ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = &txnID, 60000, -1, -1
	if r := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse); r.ErrorCode != 42 {
		t.Errorf("InitProducerId of a 70,000-byte transactional id: code %d, want INVALID_REQUEST (42)", r.ErrorCode)
	}
	rc.c.Close()
	if st, _ := n.terminate(30 * time.Second); st == nil || !st.Success() {
		t.Fatalf("SIGTERM: %v", st)
	}
	n.restart()
	rc = dialRaw(t, n.addr())
	if code := offsetCommit(rc, "ok", -1, "", nil, "t", 3, ""); code != 0 {
		t.Fatalf("after the restart, a commit: %d", code)
	}
}

// TestStartupSkipsABadMetadataKey: a stored key of the metadata (not record data) that does
// not decode, planted in Pebble while the node is down (the committed-offset key a wrapped
// u16 length wrote, a group record and a transactional id's record that are not JSON), is
// named in an error logged at start-up and skipped: the node starts and serves the rest.
func TestStartupSkipsABadMetadataKey(t *testing.T) {
	n := startInlet(t)
	rc := dialRaw(t, n.addr())
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(4)
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "t", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	rc.roundTrip(ct)
	if code := offsetCommit(rc, "good", -1, "", nil, "t", 5, "kept"); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	rc.c.Close()
	if st, _ := n.terminate(30 * time.Second); st == nil || !st.Success() {
		t.Fatalf("SIGTERM: %v", st)
	}

	wrapped := []byte{'o'}
	wrapped = binary.BigEndian.AppendUint16(wrapped, uint16(70000&0xffff))
	wrapped = append(wrapped, long('g', 70000)...)
	wrapped = binary.BigEndian.AppendUint16(wrapped, 1)
	wrapped = append(wrapped, 't', 0, 0, 0, 0)
	db, err := pebble.Open(n.dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		t.Fatalf("open the node's Pebble: %v", err)
	}
	for _, kv := range [][2][]byte{
		{wrapped, make([]byte, 20)},
		{[]byte("gbroken-group"), []byte("{")},
		{[]byte("xbroken-txn"), []byte("not json")},
	} {
		if err := db.Set(kv[0], kv[1], pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	n.restart()
	for _, s := range []string{hex.EncodeToString(wrapped[:64]), hex.EncodeToString([]byte("gbroken-group")), "broken-txn"} {
		if !n.logged(s) {
			t.Errorf("the bad key %s is not named in the log", s)
		}
	}
	if !n.logged("level=ERROR msg=\"batchlog: skipping a stored committed offset") {
		t.Error("no error logged for the bad offset key")
	}
	rc = dialRaw(t, n.addr())
	if off, md := offsetFetch(rc, "good", "t"); off != 5 || md != "kept" {
		t.Fatalf("the good offset after the start: %d %q", off, md)
	}
}

// TestExpiryConfigsAreBrokerConfigs: offsets.retention.minutes and
// transactional.id.expiration.ms are set by their flags and shown by DescribeConfigs of the
// broker, with Kafka's defaults when not set.
func TestExpiryConfigsAreBrokerConfigs(t *testing.T) {
	describe := func(n *inlet) map[string]string {
		rc := dialRaw(t, n.addr())
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(3)
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		r.ConfigNames = []string{"offsets.retention.minutes", "transactional.id.expiration.ms"}
		req.Resources = append(req.Resources, r)
		resp := rc.roundTrip(req).(*kmsg.DescribeConfigsResponse)
		out := map[string]string{}
		for _, res := range resp.Resources {
			for _, c := range res.Configs {
				if c.Value != nil {
					out[c.Name] = *c.Value
				}
			}
		}
		return out
	}
	def := describe(startInlet(t))
	if def["offsets.retention.minutes"] != "10080" || def["transactional.id.expiration.ms"] != "604800000" {
		t.Errorf("defaults: %v", def)
	}
	set := describe(startInlet(t, "--offsets-retention-minutes", "60", "--transactional-id-expiration-ms", "3600000"))
	if set["offsets.retention.minutes"] != "60" || set["transactional.id.expiration.ms"] != "3600000" {
		t.Errorf("set by flags: %v", set)
	}
}
