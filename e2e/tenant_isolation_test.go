package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"inlet/auth"
	"inlet/conn"
	"inlet/docs"
	"inlet/server"
)

// Tenant isolation, walked API by API: alice (prefix "a.") asks every API key that the API
// table of docs/kafka-compatibility.md lists about bob's topic, group, transactional id and
// user, once by their real names and once by decoy names of the same length under bob's
// prefix that exist nowhere. Kafka answers an unauthorized resource the same whether or not
// it exists, so the two answers must be byte for byte the same once the decoy names are put
// back; the decoy answer must not name anything of bob's (nor the super users); every part
// of the real answer that names bob's resources must carry an authorization error; and
// afterwards everything stored (bob's offsets and alice's, configs, records, transactions,
// ACLs, users, quotas, groups) is as it was.

// isoNames are the names a probe asks about.
type isoNames struct{ topic, group, txn, user string }

var (
	isoReal  = isoNames{"b.secret", "b.secret-group", "b.secret-txn", "bob"}
	isoDecoy = isoNames{"b.sekret", "b.sekret-group", "b.sekret-txn", "bxb"}
	// isoForbidden must never appear in an answer to alice that did not ask for it.
	isoForbidden = []string{"b.secret", "bob", "User:chief"}
)

// undecoy puts the real names back into an encoded answer to a decoy request (same lengths,
// so every length prefix stays right).
func undecoy(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("b.sekret"), []byte("b.secret"))
	return bytes.ReplaceAll(b, []byte("bxb"), []byte("bob"))
}

// isoProbe is one request to walk: build makes it for a set of names.
type isoProbe struct {
	key     int16
	version int16 // -1: the highest the node serves
	desc    string
	// preAuth probes are sent before authenticating (the SASL steps themselves).
	preAuth bool
	build   func(n isoNames) kmsg.Request
}

const isoAlicePW = "alice-secret"

// isolationUsers: alice (a.), bob (b.) and chief (every topic, a super user; not "admin",
// which Kafka's documentation of super.users quotes).
func isolationUsers(t testing.TB) *auth.Users {
	t.Helper()
	var us []auth.User
	for _, u := range []struct{ name, pw, prefix string }{{"alice", isoAlicePW, "a."}, {"bob", "bob-secret", "b."}, {"chief", "chief-secret", "*"}} {
		c, err := auth.NewCredential(auth.ScramSHA256, u.pw, auth.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, auth.User{Principal: auth.Principal{Name: u.name, TopicPrefixes: []string{u.prefix}}, SHA256: &c})
	}
	users, err := auth.NewUsers(us)
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// loginRaw opens a raw connection authenticated with SASL PLAIN.
func loginRaw(t testing.TB, addr, user, pw string) *rawConn {
	t.Helper()
	rc := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake as %s: error %d", user, r.ErrorCode)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pw)
	if r := rc.roundTrip(au).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 {
		t.Fatalf("authenticate as %s: error %d", user, r.ErrorCode)
	}
	return rc
}

// exchange sends req on rc and returns the raw answer (after the correlation id) and its
// decoding; an error when the node closes the connection or answers garbage.
func exchange(rc *rawConn, req kmsg.Request) ([]byte, kmsg.Response, error) {
	b, corr := rc.frame(req)
	_ = rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(b); err != nil {
		return nil, nil, err
	}
	gotCorr, body, err := rc.readFrame(10 * time.Second)
	if err != nil {
		return nil, nil, err
	}
	if gotCorr != corr {
		return nil, nil, fmt.Errorf("correlation id %d, want %d", gotCorr, corr)
	}
	resp, err := decodeResponse(req, body)
	return body, resp, err
}

func encodeResp(resp kmsg.Response) []byte { return resp.AppendTo(nil) }

func showResp(resp kmsg.Response) string {
	b, err := json.Marshal(resp)
	if err != nil {
		return fmt.Sprintf("%+v", resp)
	}
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// authCodes are the answers Kafka gives about a resource the principal may not use.
var authCodes = map[int16]bool{29: true, 30: true, 31: true, 53: true} // TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED

// deniedWhereNamed walks a decoded answer: every struct with a name field (Topic,
// ResourceName, Group, TransactionalID, User) holding one of real's names must carry error
// codes, all of them authorization failures.
func deniedWhereNamed(v reflect.Value, real map[string]bool, path string, errs *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			deniedWhereNamed(v.Elem(), real, path, errs)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			deniedWhereNamed(v.Index(i), real, fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Struct:
		for _, f := range []string{"Topic", "ResourceName", "Group", "TransactionalID", "User"} {
			fv := v.FieldByName(f)
			if !fv.IsValid() {
				continue
			}
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			if fv.Kind() != reflect.String || !real[fv.String()] {
				continue
			}
			var codes []int16
			collectCodes(v, &codes)
			ok := len(codes) > 0
			for _, c := range codes {
				ok = ok && authCodes[c]
			}
			if !ok {
				*errs = append(*errs, fmt.Sprintf("%s names %q with error codes %v, want authorization failures", path, fv.String(), codes))
			}
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				deniedWhereNamed(v.Field(i), real, path+"."+v.Type().Field(i).Name, errs)
			}
		}
	}
}

func collectCodes(v reflect.Value, codes *[]int16) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectCodes(v.Elem(), codes)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Uint8 {
			for i := 0; i < v.Len(); i++ {
				collectCodes(v.Index(i), codes)
			}
		}
	case reflect.Struct:
		if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
			*codes = append(*codes, int16(f.Int()))
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				collectCodes(v.Field(i), codes)
			}
		}
	}
}

// readmeAPIKeys are the API keys of the API table in docs/kafka-compatibility.md.
func readmeAPIKeys(t *testing.T) []int16 {
	t.Helper()
	s := docs.File(t, "docs/kafka-compatibility.md")
	begin, end := strings.Index(s, "<!-- apis:begin"), strings.Index(s, "<!-- apis:end -->")
	if begin < 0 || end < begin {
		t.Fatal("docs/kafka-compatibility.md has no apis:begin/apis:end table")
	}
	var keys []int16
	for _, line := range strings.Split(s[begin:end], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		k, err := strconv.Atoi(strings.TrimSpace(cells[2]))
		if err != nil {
			continue // the header and its rule
		}
		keys = append(keys, int16(k))
	}
	if len(keys) < 40 {
		t.Fatalf("the API table of docs/kafka-compatibility.md lists %d keys", len(keys))
	}
	return keys
}

func parts(n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// isoProbes asks every API about the names it is given. Partitions 0-5 of a 3-partition
// topic: an answer that differs between them tells the partition count.
func isoProbes(nodeID int32) []isoProbe {
	batch := plainBatch(2, 1, "alice").encode()
	node := strconv.Itoa(int(nodeID))
	p := func(key, version int16, desc string, build func(n isoNames) kmsg.Request) isoProbe {
		return isoProbe{key: key, version: version, desc: desc, build: build}
	}
	produce := func(txn bool) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 5000
			topic := n.topic
			if txn {
				req.TransactionID, topic = kmsg.StringPtr(n.txn), "a.mine"
			}
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			for _, i := range parts(6) {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = i, batch
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			return req
		}
	}
	fetch := func(n isoNames) kmsg.Request {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 10, 1, 1<<20, -1
		for _, topic := range []string{n.topic, "a.mine"} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			for _, i := range parts(6) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = i, 1<<20, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	listOffsets := func(n isoNames) kmsg.Request {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = n.topic
		for _, i := range parts(6) {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = i, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	}
	metadata := func(all bool) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrMetadataRequest()
			req.AllowAutoTopicCreation = true
			if !all {
				req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(n.topic)}, {Topic: kmsg.StringPtr("a.mine")}}
			}
			return req
		}
	}
	offsetCommit := func(group func(n isoNames) string) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation, req.RetentionTimeMillis = group(n), -1, -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = n.topic
			for _, i := range parts(6) {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = i, 1234, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			return req
		}
	}
	aliceGroup := func(isoNames) string { return "a.g" }
	theirGroup := func(n isoNames) string { return n.group }
	offsetFetch := func(group func(n isoNames) string, all bool) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = group(n)
			if !all {
				req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: n.topic, Partitions: parts(6)}, {Topic: "a.mine", Partitions: parts(1)}}
			}
			return req
		}
	}
	offsetFetchGroups := func(n isoNames) kmsg.Request {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = true
		req.Groups = []kmsg.OffsetFetchRequestGroup{
			{Group: "a.g"}, // every topic
			{Group: "a.g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: n.topic, Partitions: parts(6)}, {Topic: "a.mine", Partitions: parts(1)}}},
			{Group: n.group},
		}
		return req
	}
	txnOffsetCommit := func(txn func(n isoNames) string, group func(n isoNames) string) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = txn(n), group(n), 1, 0, -1
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = n.topic
			for _, i := range parts(6) {
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = i, 1234, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			return req
		}
	}
	aliceTxn := func(isoNames) string { return "a.txn" }
	theirTxn := func(n isoNames) string { return n.txn }
	offsetDelete := func(group func(n isoNames) string) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = group(n)
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = n.topic
			for _, i := range parts(6) {
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = i
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			return req
		}
	}
	topicResource := func(n isoNames) []kmsg.DescribeConfigsRequestResource {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, n.topic
		return []kmsg.DescribeConfigsRequestResource{r}
	}
	describeConfigs := func(resources func(n isoNames) []kmsg.DescribeConfigsRequestResource) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Resources, req.IncludeSynonyms, req.IncludeDocumentation = resources(n), true, true
			return req
		}
	}
	brokerResources := func(isoNames) []kmsg.DescribeConfigsRequestResource {
		var out []kmsg.DescribeConfigsRequestResource
		for _, name := range []string{node, ""} {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
			out = append(out, r)
		}
		return out
	}
	logDirs := func(all bool) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			if !all {
				req.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: n.topic, Partitions: parts(6)}, {Topic: "a.mine", Partitions: parts(1)}}
			}
			return req
		}
	}
	scram := func(del bool) func(n isoNames) kmsg.Request {
		return func(n isoNames) kmsg.Request {
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			if del {
				req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: n.user, Mechanism: 1}}
			} else {
				req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: n.user, Mechanism: 1, Iterations: 4096,
					Salt: []byte("0123456789abcdef"), SaltedPassword: bytes.Repeat([]byte{7}, 32)}}
			}
			return req
		}
	}
	probes := []isoProbe{
		p(0, -1, "produce to their topic", produce(false)),
		p(0, -1, "produce to a.mine with their transactional id", produce(true)),
		p(0, 3, "produce v3 to their topic", produce(false)),
		p(1, -1, "fetch their topic", fetch),
		p(1, 4, "fetch v4 their topic", fetch),
		p(2, -1, "list offsets", listOffsets),
		p(2, 0, "list offsets v0", func(n isoNames) kmsg.Request {
			req := listOffsets(n).(*kmsg.ListOffsetsRequest)
			for i := range req.Topics[0].Partitions {
				req.Topics[0].Partitions[i].MaxNumOffsets = 5
			}
			return req
		}),
		p(3, -1, "metadata of their topic, allowing auto-creation", metadata(false)),
		p(3, 0, "metadata v0 of their topic", metadata(false)),
		p(3, 4, "metadata v4 of their topic", metadata(false)),
		p(3, -1, "metadata of every topic", metadata(true)),
		p(3, 0, "metadata v0 of every topic", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.Topics = []kmsg.MetadataRequestTopic{}
			return r
		}),
		p(8, -1, "offset commit of a.g on their topic", offsetCommit(aliceGroup)),
		p(8, 0, "offset commit v0 of a.g on their topic", offsetCommit(aliceGroup)),
		p(8, 2, "offset commit v2 of a.g on their topic", offsetCommit(aliceGroup)),
		p(8, -1, "offset commit of their group", offsetCommit(theirGroup)),
		p(9, 1, "offset fetch v1 of a.g on their topic", offsetFetch(aliceGroup, false)),
		p(9, 5, "offset fetch v5 of a.g, every topic", offsetFetch(aliceGroup, true)),
		p(9, 7, "offset fetch v7 of a.g on their topic", offsetFetch(aliceGroup, false)),
		p(9, 7, "offset fetch v7 of their group, every topic", offsetFetch(theirGroup, true)),
		p(9, 8, "offset fetch v8, three groups", offsetFetchGroups),
		p(10, 3, "find coordinator v3 of a.g", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKey = "a.g"
			return r
		}),
		p(11, -1, "join their group", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = n.group, 10000, 10000, "consumer"
			meta := kmsg.NewConsumerMemberMetadata()
			meta.Topics = []string{n.topic}
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
			return r
		}),
		p(12, -1, "heartbeat in their group", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = n.group, "m"
			return r
		}),
		p(13, -1, "leave their group", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.Members = n.group, []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
			return r
		}),
		p(14, -1, "sync their group", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID, r.ProtocolType, r.Protocol = n.group, "m", kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			return r
		}),
		p(15, -1, "describe their group and a.g", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{n.group, "a.g"}
			return r
		}),
		p(16, -1, "list groups", func(isoNames) kmsg.Request { return kmsg.NewPtrListGroupsRequest() }),
		{key: 17, version: 1, desc: "sasl handshake", preAuth: true, build: func(isoNames) kmsg.Request {
			r := kmsg.NewPtrSASLHandshakeRequest()
			r.Mechanism = "PLAIN"
			return r
		}},
		p(18, -1, "api versions", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrApiVersionsRequest()
			r.ClientSoftwareName, r.ClientSoftwareVersion = "inlet-e2e", "1"
			return r
		}),
		p(19, -1, "create their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.TimeoutMillis = 5000
			r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: n.topic, NumPartitions: 3, ReplicationFactor: 1}}
			return r
		}),
		p(19, -1, "create their topic, validate only", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.TimeoutMillis, r.ValidateOnly = 5000, true
			r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: n.topic, NumPartitions: 3, ReplicationFactor: 1}}
			return r
		}),
		p(20, -1, "delete their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TimeoutMillis = 5000
			r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(n.topic)}}
			return r
		}),
		p(20, 0, "delete v0 their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TimeoutMillis, r.TopicNames = 5000, []string{n.topic}
			return r
		}),
		p(21, -1, "delete their records", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.TimeoutMillis = 5000
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = n.topic
			for _, i := range parts(6) {
				rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: i, Offset: 1})
			}
			r.Topics = append(r.Topics, rt)
			return r
		}),
		p(22, -1, "init their transactional id", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = kmsg.StringPtr(n.txn), 60000, -1, -1
			return r
		}),
		p(23, -1, "offset for leader epoch", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = n.topic
			for _, i := range parts(6) {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetForLeaderEpochRequestTopicPartition{Partition: i, CurrentLeaderEpoch: -1, LeaderEpoch: 0})
			}
			r.Topics = append(r.Topics, rt)
			return r
		}),
		p(24, -1, "add their topic to a.txn", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = "a.txn", 1, 0
			r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: n.topic, Partitions: parts(6)}}
			return r
		}),
		p(24, -1, "add a.mine to their transaction", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = n.txn, 1, 0
			r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a.mine", Partitions: parts(1)}}
			return r
		}),
		p(25, -1, "add their group's offsets to a.txn", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "a.txn", 1, 0, n.group
			return r
		}),
		p(25, -1, "add a.g's offsets to their transaction", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = n.txn, 1, 0, "a.g"
			return r
		}),
		p(26, -1, "end their transaction", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID, r.ProducerEpoch = n.txn, 1, 0
			return r
		}),
		p(28, -1, "txn offset commit of a.g on their topic", txnOffsetCommit(aliceTxn, aliceGroup)),
		p(28, 0, "txn offset commit v0 of a.g on their topic", txnOffsetCommit(aliceTxn, aliceGroup)),
		p(28, -1, "txn offset commit with their transactional id", txnOffsetCommit(theirTxn, aliceGroup)),
		p(28, -1, "txn offset commit of their group", txnOffsetCommit(aliceTxn, theirGroup)),
		p(29, -1, "describe every ACL", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}),
		p(29, -1, "describe ACLs matching their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(n.topic), kmsg.ACLResourcePatternTypeMatch
			r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}),
		p(30, -1, "grant alice their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			r.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: n.topic,
				ResourcePatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: "User:alice", Host: "*",
				Operation: kmsg.ACLOperationAll, PermissionType: kmsg.ACLPermissionTypeAllow}}
			return r
		}),
		p(31, -1, "delete their ACLs", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			r.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
				Principal: kmsg.StringPtr("User:" + n.user), Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
			return r
		}),
		p(32, -1, "describe their topic's configs", describeConfigs(topicResource)),
		p(32, 0, "describe v0 their topic's configs", describeConfigs(topicResource)),
		p(32, -1, "describe the broker's configs", describeConfigs(brokerResources)),
		p(33, -1, "alter their topic's configs", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: n.topic,
				Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1")}}}}
			return r
		}),
		p(35, -1, "describe log dirs of their topic", logDirs(false)),
		p(35, -1, "describe every log dir", logDirs(true)),
		{key: 36, version: 2, desc: "sasl authenticate", preAuth: true, build: func(isoNames) kmsg.Request {
			r := kmsg.NewPtrSASLAuthenticateRequest()
			r.SASLAuthBytes = []byte("\x00alice\x00" + isoAlicePW)
			return r
		}},
		p(37, -1, "create partitions of their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.TimeoutMillis = 5000
			r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: n.topic, Count: 6}}
			return r
		}),
		p(42, -1, "delete their group", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{n.group}
			return r
		}),
		p(43, -1, "elect leaders of their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.TimeoutMillis = 5000
			r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: n.topic, Partitions: parts(6)}}
			return r
		}),
		p(43, -1, "elect leaders of every partition", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.TimeoutMillis = 5000
			return r
		}),
		p(44, -1, "incrementally alter their topic's configs", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: n.topic,
				Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("1")}}}}
			return r
		}),
		p(45, -1, "reassign their partitions", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			r.TimeoutMillis = 5000
			r.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: n.topic,
				Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{nodeID}}, {Partition: 4, Replicas: []int32{nodeID}}}}}
			return r
		}),
		p(46, -1, "list their reassignments", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrListPartitionReassignmentsRequest()
			r.TimeoutMillis = 5000
			r.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: n.topic, Partitions: parts(6)}}
			return r
		}),
		p(46, -1, "list every reassignment", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrListPartitionReassignmentsRequest()
			r.TimeoutMillis = 5000
			return r
		}),
		p(47, -1, "delete a.g's offsets of their topic", offsetDelete(aliceGroup)),
		p(47, -1, "delete their group's offsets", offsetDelete(theirGroup)),
		p(48, -1, "describe every quota", func(isoNames) kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() }),
		p(48, -1, "describe their quota", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDescribeClientQuotasRequest()
			r.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0, Match: kmsg.StringPtr(n.user)}}
			return r
		}),
		p(49, -1, "alter their quota", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrAlterClientQuotasRequest()
			r.Entries = []kmsg.AlterClientQuotasRequestEntry{{
				Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr(n.user)}},
				Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1}},
			}}
			return r
		}),
		p(50, -1, "describe every user", func(isoNames) kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() }),
		p(50, -1, "describe their user", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
			r.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: n.user}}
			return r
		}),
		p(51, -1, "set their password", scram(false)),
		p(51, -1, "delete their user", scram(true)),
		p(57, -1, "update features", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrUpdateFeaturesRequest()
			r.TimeoutMillis = 5000
			r.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{{Feature: "transaction.version", MaxVersionLevel: 1, UpgradeType: 1}}
			return r
		}),
		p(60, -1, "describe the cluster", func(isoNames) kmsg.Request { return kmsg.NewPtrDescribeClusterRequest() }),
		p(61, -1, "describe their producers", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: n.topic, Partitions: parts(6)}}
			return r
		}),
		p(65, -1, "describe their transaction", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{n.txn, "a.txn"}
			return r
		}),
		p(66, -1, "list every transaction", func(isoNames) kmsg.Request {
			r := kmsg.NewPtrListTransactionsRequest()
			r.DurationFilterMillis = -1
			return r
		}),
		p(68, -1, "join their group (KIP-848)", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.RebalanceTimeoutMillis = n.group, "m", 10000
			r.SubscribedTopicNames, r.Topics = []string{"a.mine"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return r
		}),
		p(68, -1, "join a.g (KIP-848) subscribing to their topic", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.RebalanceTimeoutMillis = "a.g", "m", 10000
			r.SubscribedTopicNames, r.Topics = []string{n.topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return r
		}),
		p(69, -1, "describe their consumer group and a.g", func(n isoNames) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{n.group, "a.g"}
			return r
		}),
	}
	return probes
}

// TestTenantLearnsNothingOutsideItsPrefix: bob has a topic with records, idempotent and
// transactional producers, a group with offsets, a topic config, an ACL, a quota and a
// user; alice walks every API key of the docs' API table asking about them (see the top of
// this file) and learns nothing, and changes nothing.
func TestTenantLearnsNothingOutsideItsPrefix(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.Users = isolationUsers(t)
		c.SuperUsers = []string{"chief"}
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
	})
	addr := b.srv.ListenerAddr("sasl")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(user, pw string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: user, Pass: pw}.AsMechanism()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	// bob's state.
	b.createTopic("b.secret", 3)
	b.createTopic("a.mine", 1)
	bob := client("bob", "bob-secret")
	for i := int32(0); i < 3; i++ {
		if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "b.secret", Partition: i, Value: []byte("secret")}).FirstErr(); err != nil {
			t.Fatalf("bob produces: %v", err)
		}
	}
	btx := client("bob", "bob-secret", kgo.TransactionalID("b.secret-txn"))
	if err := btx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := btx.ProduceSync(ctx, &kgo.Record{Topic: "b.secret", Partition: 1, Value: []byte("txn")}).FirstErr(); err != nil {
		t.Fatalf("bob produces in a transaction: %v", err)
	}
	if err := btx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	badm := kadm.NewClient(bob)
	var offs kadm.Offsets
	for i := int32(0); i < 3; i++ {
		offs.Add(kadm.Offset{Topic: "b.secret", Partition: i, At: 1, LeaderEpoch: -1})
	}
	if r, err := badm.CommitOffsets(ctx, "b.secret-group", offs); err != nil || r.Error() != nil {
		t.Fatalf("bob commits: %v / %v", err, r.Error())
	}
	if r, err := badm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("123456789")}}, "b.secret"); err != nil || r[0].Err != nil {
		t.Fatalf("bob sets a config: %v / %+v", err, r)
	}
	// alice's own state, and an offset of her group on bob's topic that an operator made
	// (Kafka hides it from her: she may not describe the topic).
	alice := client("alice", isoAlicePW)
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "a.mine", Value: []byte("mine")}).FirstErr(); err != nil {
		t.Fatalf("alice produces: %v", err)
	}
	var aoffs kadm.Offsets
	aoffs.Add(kadm.Offset{Topic: "a.mine", Partition: 0, At: 1, LeaderEpoch: -1})
	if r, err := kadm.NewClient(alice).CommitOffsets(ctx, "a.g", aoffs); err != nil || r.Error() != nil {
		t.Fatalf("alice commits: %v / %v", err, r.Error())
	}
	admin := client("chief", "chief-secret")
	aadm := kadm.NewClient(admin)
	var hidden kadm.Offsets
	hidden.Add(kadm.Offset{Topic: "b.secret", Partition: 0, At: 5, LeaderEpoch: -1})
	if r, err := aadm.CommitOffsets(ctx, "a.g", hidden); err != nil || r.Error() != nil {
		t.Fatalf("admin commits a.g on b.secret: %v / %v", err, r.Error())
	}
	if _, err := aadm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("bob")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 30}},
	}}); err != nil {
		t.Fatalf("admin sets bob's quota: %v", err)
	}

	before := isoSnapshot(t, addr)

	keys := readmeAPIKeys(t)
	served := map[int16]int16{}
	for _, k := range server.SupportedAPIs() {
		served[k.ApiKey] = k.MaxVersion
	}
	byKey := map[int16][]isoProbe{}
	for _, pr := range isoProbes(1) {
		byKey[pr.key] = append(byKey[pr.key], pr)
	}
	real := map[string]bool{isoReal.topic: true, isoReal.group: true, isoReal.txn: true, isoReal.user: true}
	for _, key := range keys {
		if len(byKey[key]) == 0 {
			t.Errorf("api key %d (%s) is in the API table of docs/kafka-compatibility.md but has no probe here", key, kmsg.NameForKey(key))
		}
		for _, pr := range byKey[key] {
			name := fmt.Sprintf("%s(%d) %s", kmsg.NameForKey(key), key, pr.desc)
			v := pr.version
			if v < 0 {
				v = served[key]
			}
			ask := func(n isoNames) ([]byte, kmsg.Response, error) {
				var rc *rawConn
				if pr.preAuth {
					rc = dialRaw(t, addr)
					if key == 36 {
						hs := kmsg.NewPtrSASLHandshakeRequest()
						hs.Version, hs.Mechanism = 1, "PLAIN"
						rc.roundTrip(hs)
					}
				} else {
					rc = loginRaw(t, addr, "alice", isoAlicePW)
				}
				defer rc.c.Close()
				req := pr.build(n)
				req.SetVersion(v)
				return exchange(rc, req)
			}
			rawReal, respReal, err := ask(isoReal)
			if err != nil {
				t.Errorf("%s v%d: %v", name, v, err)
				continue
			}
			rawDecoy, respDecoy, err := ask(isoDecoy)
			if err != nil {
				t.Errorf("%s v%d (decoy names): %v", name, v, err)
				continue
			}
			for _, f := range isoForbidden {
				if bytes.Contains(rawDecoy, []byte(f)) {
					t.Errorf("%s v%d: an answer that was not asked about them names %q: %s", name, v, f, showResp(respDecoy))
				}
			}
			if f := "User:chief"; bytes.Contains(rawReal, []byte(f)) {
				t.Errorf("%s v%d: answer names %q: %s", name, v, f, showResp(respReal))
			}
			if !bytes.Equal(undecoy(encodeResp(respDecoy)), encodeResp(respReal)) {
				t.Errorf("%s v%d: the answer tells bob's resources from names that exist nowhere:\n real:  %s\n decoy: %s", name, v, showResp(respReal), showResp(respDecoy))
			}
			var errs []string
			deniedWhereNamed(reflect.ValueOf(respReal), real, "", &errs)
			for _, e := range errs {
				t.Errorf("%s v%d: %s", name, v, e)
			}
		}
	}

	after := isoSnapshot(t, addr)
	for i := range before {
		if !bytes.Equal(before[i].enc, after[i].enc) {
			t.Errorf("%s changed while alice probed:\n before: %s\n after:  %s", before[i].desc, before[i].shown, after[i].shown)
		}
	}
	if _, ok := b.blog.Topic(isoDecoy.topic); ok {
		t.Errorf("alice's probes created %s", isoDecoy.topic)
	}
	// bob still logs in with his password.
	loginRaw(t, addr, "bob", "bob-secret").c.Close()
}

type isoState struct {
	desc, shown string
	enc         []byte
}

// isoSnapshot is what the node stores about bob (and alice's group), as admin reads it.
func isoSnapshot(t *testing.T, addr string) []isoState {
	t.Helper()
	rc := loginRaw(t, addr, "chief", "chief-secret")
	defer rc.c.Close()
	var out []isoState
	add := func(desc string, req kmsg.Request) {
		t.Helper()
		resp := rc.roundTrip(req)
		out = append(out, isoState{desc: desc, shown: showResp(resp), enc: encodeResp(resp)})
	}
	version := func(req kmsg.Request, v int16) kmsg.Request { req.SetVersion(v); return req }

	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(isoReal.topic)}, {Topic: kmsg.StringPtr(isoDecoy.topic)}}
	add("b.secret's metadata", version(md, 12))
	for _, ts := range []int64{-2, -1} {
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.ReplicaID = -1
		lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: isoReal.topic}}
		for _, i := range parts(3) {
			lo.Topics[0].Partitions = append(lo.Topics[0].Partitions, kmsg.ListOffsetsRequestTopicPartition{Partition: i, Timestamp: ts, CurrentLeaderEpoch: -1})
		}
		add(fmt.Sprintf("b.secret's offsets at %d", ts), version(lo, 7))
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: isoReal.topic}}
	add("b.secret's configs", version(dc, 4))
	for _, g := range []string{isoReal.group, "a.g", isoDecoy.group} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g}}
		add(g+"'s offsets", version(of, 8))
	}
	add("the groups", version(kmsg.NewPtrListGroupsRequest(), 5))
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{isoReal.txn, isoDecoy.txn}
	add("bob's transaction", version(dt, 0))
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: isoReal.topic, Partitions: parts(3)}}
	add("b.secret's producers", version(dp, 0))
	acl := kmsg.NewPtrDescribeACLsRequest()
	acl.ResourceType, acl.ResourcePatternType, acl.Operation, acl.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	add("the ACLs", version(acl, 3))
	add("the users", version(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), 0))
	add("the quotas", version(kmsg.NewPtrDescribeClientQuotasRequest(), 1))
	return out
}

// TestOffsetAPIsCheckEachTopic: one OffsetCommit, TxnOffsetCommit, OffsetFetch or
// OffsetDelete naming alice's topic and bob's serves alice's partitions as before
// (committed, fetched, deleted) and answers bob's TOPIC_AUTHORIZATION_FAILED per partition
// (Kafka's READ on each topic), storing and deleting nothing of them.
func TestOffsetAPIsCheckEachTopic(t *testing.T) {
	b := startBroker(t, func(c *server.Config) {
		c.Users = isolationUsers(t)
		c.SuperUsers = []string{"chief"}
		c.Listeners = []conn.Listener{{Name: "sasl", Address: "127.0.0.1:0", Protocol: "SASL_PLAINTEXT"}}
	})
	addr := b.srv.ListenerAddr("sasl")
	b.createTopic("a.mine", 1)
	b.createTopic("b.secret", 3)
	alice := loginRaw(t, addr, "alice", isoAlicePW)
	chief := loginRaw(t, addr, "chief", "chief-secret")
	// chief's view of a.g: "topic/partition@offset" for every committed offset.
	committed := func() string {
		t.Helper()
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version = 8
		of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "a.g"}}
		var out []string
		for _, rt := range chief.roundTrip(of).(*kmsg.OffsetFetchResponse).Groups[0].Topics {
			for _, rp := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s/%d@%d", rt.Topic, rp.Partition, rp.Offset))
			}
		}
		return strings.Join(out, " ")
	}
	// codes flattens per-partition answers to "topic/partition:code".
	type answer struct {
		topic     string
		partition int32
		code      int16
	}
	expect := func(what string, got []answer, mineWant int16) {
		t.Helper()
		n := 0
		for _, a := range got {
			want := int16(29) // TOPIC_AUTHORIZATION_FAILED
			if a.topic == "a.mine" {
				want = mineWant
			}
			if a.code != want {
				t.Errorf("%s: %s/%d answered %d, want %d", what, a.topic, a.partition, a.code, want)
			}
			n++
		}
		if n != 7 {
			t.Errorf("%s: %d partitions answered, want 7 (a.mine/0 and b.secret/0-5)", what, n)
		}
	}

	for _, v := range []int16{0, 8} {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Version, oc.Group, oc.Generation, oc.RetentionTimeMillis = v, "a.g", -1, -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{
			{Topic: "b.secret", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 9, LeaderEpoch: -1}}},
			{Topic: "a.mine", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3 + int64(v), LeaderEpoch: -1}}},
		}
		for _, i := range parts(6)[1:] {
			oc.Topics[0].Partitions = append(oc.Topics[0].Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: i, Offset: 9, LeaderEpoch: -1})
		}
		var got []answer
		for _, rt := range alice.roundTrip(oc).(*kmsg.OffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				got = append(got, answer{rt.Topic, rp.Partition, rp.ErrorCode})
			}
		}
		expect(fmt.Sprintf("OffsetCommit v%d", v), got, 0)
		if c, want := committed(), fmt.Sprintf("a.mine/0@%d", 3+v); c != want {
			t.Fatalf("after OffsetCommit v%d a.g holds %q, want %q", v, c, want)
		}
	}

	// An offset of a.g on b.secret that an operator committed: alice may neither see it nor
	// delete it.
	hidden := kmsg.NewPtrOffsetCommitRequest()
	hidden.Version, hidden.Group, hidden.Generation = 8, "a.g", -1
	hidden.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "b.secret", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
	if rp := chief.roundTrip(hidden).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0]; rp.ErrorCode != 0 {
		t.Fatalf("chief commits a.g on b.secret: %d", rp.ErrorCode)
	}
	for _, v := range []int16{1, 7, 8} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version, of.Group = v, "a.g"
		named := []kmsg.OffsetFetchRequestTopic{{Topic: "a.mine", Partitions: []int32{0}}, {Topic: "b.secret", Partitions: parts(6)}}
		of.Topics = named
		if v == 8 {
			of.Topics = nil
			of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "a.g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a.mine", Partitions: []int32{0}}, {Topic: "b.secret", Partitions: parts(6)}}}, {Group: "a.g"}}
		}
		resp := alice.roundTrip(of).(*kmsg.OffsetFetchResponse)
		var got []answer
		var all []string // the null-topics answer (v8's second group)
		if v < 8 {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					got = append(got, answer{rt.Topic, rp.Partition, rp.ErrorCode})
					if rt.Topic == "a.mine" && rp.Offset != 11 || rt.Topic == "b.secret" && rp.Offset != -1 {
						t.Errorf("OffsetFetch v%d: %s/%d at %d", v, rt.Topic, rp.Partition, rp.Offset)
					}
				}
			}
		} else {
			for _, rt := range resp.Groups[0].Topics {
				for _, rp := range rt.Partitions {
					got = append(got, answer{rt.Topic, rp.Partition, rp.ErrorCode})
					if rt.Topic == "a.mine" && rp.Offset != 11 || rt.Topic == "b.secret" && rp.Offset != -1 {
						t.Errorf("OffsetFetch v8: %s/%d at %d", rt.Topic, rp.Partition, rp.Offset)
					}
				}
			}
			for _, rt := range resp.Groups[1].Topics {
				for _, rp := range rt.Partitions {
					all = append(all, fmt.Sprintf("%s/%d@%d", rt.Topic, rp.Partition, rp.Offset))
				}
			}
			if s := strings.Join(all, " "); s != "a.mine/0@11" {
				t.Errorf("OffsetFetch v8 of every topic of a.g answers %q, want only a.mine/0@11", s)
			}
		}
		expect(fmt.Sprintf("OffsetFetch v%d", v), got, 0)
	}

	// A transaction of alice's commits a.mine's offset, not b.secret's.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = 4, kmsg.StringPtr("a.txn"), 60000, -1, -1
	ipr := alice.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	if ipr.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %d", ipr.ErrorCode)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version, ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = 3, "a.txn", ipr.ProducerID, ipr.ProducerEpoch, "a.g"
	if code := alice.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("AddOffsetsToTxn: %d", code)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.Version, tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = 3, "a.txn", "a.g", ipr.ProducerID, ipr.ProducerEpoch, -1
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "a.mine", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 20, LeaderEpoch: -1}}}, {Topic: "b.secret"}}
	for _, i := range parts(6) {
		tc.Topics[1].Partitions = append(tc.Topics[1].Partitions, kmsg.TxnOffsetCommitRequestTopicPartition{Partition: i, Offset: 21, LeaderEpoch: -1})
	}
	var got []answer
	for _, rt := range alice.roundTrip(tc).(*kmsg.TxnOffsetCommitResponse).Topics {
		for _, rp := range rt.Partitions {
			got = append(got, answer{rt.Topic, rp.Partition, rp.ErrorCode})
		}
	}
	expect("TxnOffsetCommit", got, 0)
	et := kmsg.NewPtrEndTxnRequest()
	et.Version, et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = 3, "a.txn", ipr.ProducerID, ipr.ProducerEpoch, true
	if code := alice.roundTrip(et).(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("EndTxn: %d", code)
	}
	if c, want := committed(), "a.mine/0@20 b.secret/0@5"; c != want {
		t.Fatalf("after the transaction a.g holds %q, want %q", c, want)
	}

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "a.g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "a.mine", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}, {Topic: "b.secret"}}
	for _, i := range parts(6) {
		od.Topics[1].Partitions = append(od.Topics[1].Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: i})
	}
	odr := alice.roundTrip(od).(*kmsg.OffsetDeleteResponse)
	if odr.ErrorCode != 0 {
		t.Fatalf("OffsetDelete: group error %d", odr.ErrorCode)
	}
	got = got[:0]
	for _, rt := range odr.Topics {
		for _, rp := range rt.Partitions {
			got = append(got, answer{rt.Topic, rp.Partition, rp.ErrorCode})
		}
	}
	expect("OffsetDelete", got, 0)
	if c, want := committed(), "b.secret/0@5"; c != want {
		t.Fatalf("after OffsetDelete a.g holds %q, want %q", c, want)
	}
}
