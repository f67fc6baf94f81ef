package crashtest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the Kafka protocol over one TCP connection with no client library in
// between, so a test controls (and can keep) the exact bytes of a request. Requests are
// answered in order, one at a time.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

const rawIOTimeout = 15 * time.Second

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("crashtest"))}
}

// encode frames req (size prefix, request header, body) with the next correlation id.
func (rc *rawConn) encode(req kmsg.Request) (frame []byte, corr int32) {
	rc.corr++
	return rc.f.AppendRequest(nil, req, rc.corr), rc.corr
}

// send writes an already framed request (for example a captured one) and decodes the reply
// into resp, which must be of the request's key and version. The reply's correlation id must
// be the frame's.
func (rc *rawConn) send(frame []byte, resp kmsg.Response) {
	rc.t.Helper()
	if len(frame) < 12 {
		rc.t.Fatalf("raw: frame of %d bytes", len(frame))
	}
	key := int16(binary.BigEndian.Uint16(frame[4:]))
	if key != resp.Key() {
		rc.t.Fatalf("raw: frame is api key %d, response is key %d", key, resp.Key())
	}
	_ = rc.c.SetDeadline(time.Now().Add(rawIOTimeout))
	if _, err := rc.c.Write(frame); err != nil {
		rc.t.Fatalf("raw: write api key %d: %v", key, err)
	}
	rc.recv(frame, resp)
}

// recv reads the reply to frame (a request already written, possibly in pieces) into resp.
func (rc *rawConn) recv(frame []byte, resp kmsg.Response) {
	rc.t.Helper()
	key := int16(binary.BigEndian.Uint16(frame[4:]))
	version := int16(binary.BigEndian.Uint16(frame[6:]))
	corr := int32(binary.BigEndian.Uint32(frame[8:]))
	resp.SetVersion(version)
	_ = rc.c.SetDeadline(time.Now().Add(rawIOTimeout))
	body, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("raw: read reply to api key %d v%d: %v", key, version, err)
	}
	if len(body) < 4 {
		rc.t.Fatalf("raw: reply of %d bytes", len(body))
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		rc.t.Fatalf("raw: reply correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	// Flexible responses carry a tagged-field section in the header, except ApiVersions,
	// whose response header is always v0 (KIP-511).
	if resp.IsFlexible() && key != 18 {
		body, err = skipTags(body)
		if err != nil {
			rc.t.Fatalf("raw: reply header: %v", err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("raw: decode reply to api key %d v%d: %v", key, version, err)
	}
}

// roundTrip encodes req, sends it and returns the decoded reply.
func (rc *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	frame, _ := rc.encode(req)
	resp := req.ResponseKind()
	rc.send(frame, resp)
	return resp
}

func (rc *rawConn) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > 64<<20 {
		return nil, fmt.Errorf("reply size %d", n)
	}
	body := make([]byte, n)
	_, err := io.ReadFull(rc.c, body)
	return body, err
}

// skipTags skips a tagged-field section: a count, then (tag, size, data) for each.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, fmt.Errorf("bad tag count")
	}
	b = b[w:]
	for range n {
		_, w = binary.Uvarint(b)
		if w <= 0 {
			return nil, fmt.Errorf("bad tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < size {
			return nil, fmt.Errorf("bad tag size")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// initProducerID asks for an idempotent producer id (no transactional id).
func (rc *rawConn) initProducerID() (int64, int16) {
	rc.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(1)
	req.TransactionTimeoutMillis = 60000
	resp := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		rc.t.Fatalf("InitProducerId: error code %d", resp.ErrorCode)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// produceVersion is a non-flexible Produce version every Kafka client still uses.
const produceVersion = 8

// produceRequest builds an acks=-1 Produce request carrying one batch for topic/partition.
func produceRequest(topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(produceVersion)
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceResult is the one partition's answer of a one-batch Produce response.
func produceResult(t *testing.T, resp *kmsg.ProduceResponse) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce: want one topic with one partition in the reply, got %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// listLatest returns a partition's high watermark (ListOffsets latest, read_uncommitted).
func (rc *rawConn) listLatest(topic string, partition int32) int64 {
	rc.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = -1
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.roundTrip(req).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("ListOffsets: unexpected reply %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		rc.t.Fatalf("ListOffsets %s/%d: error code %d", topic, partition, p.ErrorCode)
	}
	return p.Offset
}

// idempotentBatch builds a v2 record batch of n records from producer id/epoch with the given
// base sequence: the bytes a client would put in a Produce request. Record values are
// "<prefix>-<seq>".
func idempotentBatch(pid int64, epoch int16, baseSeq int32, n int, prefix string) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{
			OffsetDelta: int32(i),
			Value:       fmt.Appendf(nil, "%s-%d", prefix, int(baseSeq)+i),
		}
		// Length is the size of everything after the length varint: encode once with a
		// zero length (a one-byte varint) to measure it.
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		records = r.AppendTo(records)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           0, // no compression, CreateTime, not transactional
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        baseSeq,
		NumRecords:           int32(n),
		Records:              records,
	}
	raw := b.AppendTo(nil)
	// Length counts everything after itself (bytes 12..end); the CRC-32C (Castagnoli) covers
	// bytes 21..end: attributes onwards (DefaultRecordBatch).
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// tryAPIVersions sends ApiVersions v0 and reads its reply; the error says why it failed.
func (rc *rawConn) tryAPIVersions() error {
	req := kmsg.NewPtrApiVersionsRequest()
	frame, corr := rc.encode(req)
	_ = rc.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write(frame); err != nil {
		return err
	}
	body, err := rc.readFrame()
	if err != nil {
		return err
	}
	if len(body) < 6 || int32(binary.BigEndian.Uint32(body)) != corr {
		return fmt.Errorf("bad ApiVersions reply of %d bytes", len(body))
	}
	if code := int16(binary.BigEndian.Uint16(body[4:])); code != 0 {
		return fmt.Errorf("ApiVersions error %d", code)
	}
	return nil
}

// apiVersions asserts that the connection answers ApiVersions.
func (rc *rawConn) apiVersions() {
	rc.t.Helper()
	if err := rc.tryAPIVersions(); err != nil {
		rc.t.Fatalf("ApiVersions: %v", err)
	}
}
