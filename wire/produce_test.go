package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkDecoded compares a wire decode with the kmsg request it came from.
func checkDecoded(t *testing.T, got *ProduceRequest, want *kmsg.ProduceRequest) {
	t.Helper()
	if got.Version != want.Version || got.Acks != want.Acks || got.TimeoutMs != want.TimeoutMillis {
		t.Fatalf("v%d: header fields %d/%d/%d, want %d/%d/%d", want.Version,
			got.Version, got.Acks, got.TimeoutMs, want.Version, want.Acks, want.TimeoutMillis)
	}
	switch {
	case want.TransactionID == nil && got.TransactionalID != nil:
		t.Fatalf("v%d: null transactional id decoded as %q", want.Version, got.TransactionalID)
	case want.TransactionID != nil && (got.TransactionalID == nil || string(got.TransactionalID) != *want.TransactionID):
		t.Fatalf("v%d: transactional id %q, want %q", want.Version, got.TransactionalID, *want.TransactionID)
	}
	if len(got.Topics) != len(want.Topics) {
		t.Fatalf("v%d: %d topics, want %d", want.Version, len(got.Topics), len(want.Topics))
	}
	for i, wt := range want.Topics {
		gt := got.Topics[i]
		if string(gt.Name) != wt.Topic || gt.Name == nil {
			t.Fatalf("v%d topic %d: name %q, want %q", want.Version, i, gt.Name, wt.Topic)
		}
		if len(gt.Partitions) != len(wt.Partitions) {
			t.Fatalf("v%d topic %d: %d partitions, want %d", want.Version, i, len(gt.Partitions), len(wt.Partitions))
		}
		for j, wp := range wt.Partitions {
			gp := gt.Partitions[j]
			if gp.Index != wp.Partition || !bytes.Equal(gp.Records, wp.Records) || (gp.Records == nil) != (wp.Records == nil) {
				t.Fatalf("v%d topic %d partition %d: got index %d, %d bytes (nil %v), want %d, %d bytes (nil %v)",
					want.Version, i, j, gp.Index, len(gp.Records), gp.Records == nil,
					wp.Partition, len(wp.Records), wp.Records == nil)
			}
		}
	}
}

// TestProduceDecodeRoundTrip encodes every version 3..12 with kmsg (through
// the full frame, header included) and decodes it with wire.
func TestProduceDecodeRoundTrip(t *testing.T) {
	var r ProduceRequest // reused across versions on purpose
	for v := int16(MinProduceVersion); v <= MaxProduceVersion; v++ {
		req := testProduceRequest(t, v)
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("rt")).AppendRequest(nil, req, int32(v))[4:]
		h, err := ParseRequestHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		body := frame[h.BodyOffset:]
		if err := r.Decode(body, v); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		checkDecoded(t, &r, req)
		if !within(r.TransactionalID, body) {
			t.Fatalf("v%d: TransactionalID does not alias the body", v)
		}
		for _, tp := range r.Topics {
			if !within(tp.Name, body) {
				t.Fatalf("v%d: Name does not alias the body", v)
			}
			for _, p := range tp.Partitions {
				if !within(p.Records, body) {
					t.Fatalf("v%d: Records do not alias the body", v)
				}
			}
		}
	}
}

// TestProduceDecodeReuseShrinks guards reuse: a big request then a small
// one must not leave the big one's topics or partitions visible.
func TestProduceDecodeReuseShrinks(t *testing.T) {
	var r ProduceRequest
	big := testProduceRequest(t, 9)
	if err := r.Decode(big.AppendTo(nil), 9); err != nil {
		t.Fatal(err)
	}
	small := kmsg.NewPtrProduceRequest()
	small.Version = 9
	small.Acks = 1
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "one"
	tp.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 5, Records: []byte{1}}}
	small.Topics = append(small.Topics, tp)
	if err := r.Decode(small.AppendTo(nil), 9); err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, &r, small)
	if err := r.Decode(big.AppendTo(nil), 9); err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, &r, big)
}

// TestProduceDecodeEveryPrefixFails guards partial frames: any strict
// prefix of a valid body is an error, and so is a byte of trailing garbage.
func TestProduceDecodeEveryPrefixFails(t *testing.T) {
	var r ProduceRequest
	for v := int16(MinProduceVersion); v <= MaxProduceVersion; v++ {
		body := testProduceRequest(t, v).AppendTo(nil)
		for i := range len(body) {
			if err := r.Decode(body[:i:i], v); err == nil {
				t.Fatalf("v%d: prefix of %d/%d bytes decoded", v, i, len(body))
			}
		}
		if err := r.Decode(append(body[:len(body):len(body)], 0), v); err == nil {
			t.Fatalf("v%d: trailing byte accepted", v)
		}
	}
}

func TestProduceDecodeUnsupportedVersion(t *testing.T) {
	var r ProduceRequest
	for _, v := range []int16{-1, 0, 1, 2, 13, 14} {
		if err := r.Decode(testProduceRequest(t, 3).AppendTo(nil), v); err == nil {
			t.Errorf("v%d accepted", v)
		}
	}
}

// produceBody hand-builds a non-flexible v3 body prefix: null txn id, acks,
// timeout.
func produceBody() []byte {
	b := []byte{0xff, 0xff, 0xff, 0xff}           // txn id null, acks -1
	return binary.BigEndian.AppendUint32(b, 1000) // timeout
}

// TestProduceDecodeHugeArrayLength guards allocation: a four byte array
// length cannot make Decode allocate beyond the input's size.
func TestProduceDecodeHugeArrayLength(t *testing.T) {
	var r ProduceRequest
	body := binary.BigEndian.AppendUint32(produceBody(), 0x7fffffff)
	body = append(body, make([]byte, 64)...)
	if err := r.Decode(body, 3); err == nil {
		t.Fatal("accepted")
	}
	if cap(r.Topics) != 0 {
		t.Fatalf("grew Topics to %d", cap(r.Topics))
	}
	// Flexible: uvarint 0xfffffffe+1.
	flex := []byte{0, 0xff, 0xff, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if err := r.Decode(append(flex, make([]byte, 64)...), 9); err == nil {
		t.Fatal("accepted flexible")
	}
	if cap(r.Topics) != 0 {
		t.Fatalf("grew Topics to %d", cap(r.Topics))
	}
}

func TestProduceDecodeMalformed(t *testing.T) {
	topic := func(name string, nparts int32) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(len(name)))
		b = append(b, name...)
		return binary.BigEndian.AppendUint32(b, uint32(nparts))
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	arr := func(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
	part := func(idx, n int32) []byte { return cat(arr(idx), arr(n)) }
	for _, tc := range []struct {
		name string
		v    int16
		body []byte
	}{
		{"Empty", 3, nil},
		{"NullTopicsArray", 3, cat(produceBody(), arr(-1))},
		{"NegativeTopicsArray", 3, cat(produceBody(), arr(-2))},
		{"NullTopicName", 3, cat(produceBody(), arr(1), []byte{0xff, 0xff}, arr(0))},
		{"NegativeStringLength", 3, cat([]byte{0xff, 0xf0}, produceBody()[2:], arr(0))},
		{"RecordsPastEnd", 3, cat(produceBody(), arr(1), topic("t", 1), part(0, 100), []byte{1, 2, 3})},
		{"NegativeRecordsLength", 3, cat(produceBody(), arr(1), topic("t", 1), part(0, -2))},
		{"PartitionsArrayTooLong", 3, cat(produceBody(), arr(1), topic("t", 1000), part(0, 0))},
		{"FlexibleNullTopics", 9, cat([]byte{0}, produceBody()[2:], []byte{0, 0})},
		{"FlexibleMissingTags", 9, cat([]byte{0}, produceBody()[2:], []byte{1})},
		{"FlexibleTopicNameTooLong", 9, cat([]byte{0}, produceBody()[2:], []byte{2}, []byte{0x81, 0x80, 0x02}, bytes.Repeat([]byte{'a'}, 32768), []byte{1, 0, 0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r ProduceRequest
			if err := r.Decode(tc.body, tc.v); err == nil {
				t.Fatalf("decoded garbage as %+v", r)
			}
		})
	}
}

// TestProduceDecodeRecordsCapped guards that an append to Records cannot
// overwrite the next partition's bytes.
func TestProduceDecodeRecordsCapped(t *testing.T) {
	body := testProduceRequest(t, 9).AppendTo(nil)
	orig := append([]byte(nil), body...)
	var r ProduceRequest
	if err := r.Decode(body, 9); err != nil {
		t.Fatal(err)
	}
	for _, tp := range r.Topics {
		_ = append(tp.Name, "xxxx"...)
		for _, p := range tp.Partitions {
			_ = append(p.Records, "xxxx"...)
		}
	}
	if !bytes.Equal(body, orig) {
		t.Fatal("append to an aliased slice overwrote the body")
	}
}

func TestProduceDecodeZeroAllocs(t *testing.T) {
	for _, v := range []int16{3, 8, 9, 12} {
		body := testProduceRequest(t, v).AppendTo(nil)
		var r ProduceRequest
		if err := r.Decode(body, v); err != nil { // warm up
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() {
			if err := r.Decode(body, v); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("v%d: Decode allocates %v times when warm", v, n)
		}
	}
}

// testProduceResponse fills a response with every field set somewhere:
// errors, record errors with and without messages, null and set messages.
func testProduceResponse() *ProduceResponse {
	var r ProduceResponse
	r.ThrottleMs = 250
	for ti := range 3 {
		t := r.AppendTopic([]byte(fmt.Sprintf("topic-%d", ti)))
		for pi := range 3 {
			p := t.AppendPartition(int32(pi))
			switch pi {
			case 0:
				p.BaseOffset = 1 << 40
				p.LogAppendTime = 1700000000123
				p.LogStartOffset = 17
			case 1:
				p.ErrorCode = ErrInvalidRecord
				p.ErrorMessage, p.HasErrorMessage = "bad record", true
				p.RecordErrors = append(p.RecordErrors,
					RecordError{BatchIndex: 3, Message: "null key", HasMessage: true},
					RecordError{BatchIndex: 9})
			case 2:
				p.ErrorCode = ErrCorruptMessage
				p.ErrorMessage, p.HasErrorMessage = "", true
			}
		}
	}
	r.AppendTopic(nil) // empty name, no partitions
	return &r
}

// TestProduceResponseRoundTrip encodes with wire and decodes with kmsg for
// every version, including the pre-v3 ones the layout also covers.
func TestProduceResponseRoundTrip(t *testing.T) {
	r := testProduceResponse()
	for v := int16(0); v <= MaxProduceVersion; v++ {
		body := r.AppendTo(nil, v)
		k := kmsg.NewPtrProduceResponse()
		k.Version = v
		if err := k.ReadFrom(body); err != nil {
			t.Fatalf("v%d: kmsg: %v", v, err)
		}
		wantThrottle := r.ThrottleMs
		if v < 1 {
			wantThrottle = 0
		}
		if k.ThrottleMillis != wantThrottle || len(k.Topics) != len(r.Topics) {
			t.Fatalf("v%d: throttle %d, %d topics", v, k.ThrottleMillis, len(k.Topics))
		}
		for i, wt := range r.Topics {
			kt := k.Topics[i]
			if kt.Topic != string(wt.Name) || len(kt.Partitions) != len(wt.Partitions) {
				t.Fatalf("v%d topic %d: %q with %d partitions", v, i, kt.Topic, len(kt.Partitions))
			}
			for j, wp := range wt.Partitions {
				kp := kt.Partitions[j]
				want := wp
				if v < 2 {
					want.LogAppendTime = -1 // kmsg's default
				}
				if v < 5 {
					want.LogStartOffset = -1
				}
				if kp.Partition != want.Index || kp.ErrorCode != want.ErrorCode || kp.BaseOffset != want.BaseOffset ||
					kp.LogAppendTime != want.LogAppendTime || kp.LogStartOffset != want.LogStartOffset {
					t.Fatalf("v%d %d/%d: kmsg %+v, wire %+v", v, i, j, kp, want)
				}
				if v < 8 {
					if kp.ErrorMessage != nil || len(kp.ErrorRecords) != 0 {
						t.Fatalf("v%d: v8 fields leaked", v)
					}
					continue
				}
				if (kp.ErrorMessage != nil) != want.HasErrorMessage || (kp.ErrorMessage != nil && *kp.ErrorMessage != want.ErrorMessage) {
					t.Fatalf("v%d %d/%d: error message %v, want %q (%v)", v, i, j, kp.ErrorMessage, want.ErrorMessage, want.HasErrorMessage)
				}
				if len(kp.ErrorRecords) != len(want.RecordErrors) {
					t.Fatalf("v%d %d/%d: %d record errors", v, i, j, len(kp.ErrorRecords))
				}
				for e, we := range want.RecordErrors {
					ke := kp.ErrorRecords[e]
					if ke.RelativeOffset != we.BatchIndex || (ke.ErrorMessage != nil) != we.HasMessage ||
						(ke.ErrorMessage != nil && *ke.ErrorMessage != we.Message) {
						t.Fatalf("v%d: record error %d: %+v, want %+v", v, e, ke, we)
					}
				}
			}
		}
	}
}

// TestProduceResponseLongMessageTruncated guards the string bound: an error
// message over Short.MAX_VALUE is cut, never encoded with a wrapped length.
func TestProduceResponseLongMessageTruncated(t *testing.T) {
	var r ProduceResponse
	p := r.AppendTopic([]byte("t")).AppendPartition(0)
	p.ErrorMessage, p.HasErrorMessage = strings.Repeat("m", 40000), true
	for _, v := range []int16{8, 9} {
		k := kmsg.NewPtrProduceResponse()
		k.Version = v
		if err := k.ReadFrom(r.AppendTo(nil, v)); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if got := len(*k.Topics[0].Partitions[0].ErrorMessage); got != 32767 {
			t.Fatalf("v%d: message of %d bytes", v, got)
		}
	}
}

func TestProduceResponseAppendToBadVersionPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	new(ProduceResponse).AppendTo(nil, 13)
}

// TestProduceResponseReuse guards Reset/AppendTopic/AppendPartition: a
// reused response encodes exactly like a fresh one and keeps capacity.
func TestProduceResponseReuse(t *testing.T) {
	r := testProduceResponse()
	want := r.AppendTo(nil, 9)
	parts := &r.Topics[0].Partitions[0]
	r.Reset()
	if len(r.Topics) != 0 || r.ThrottleMs != 0 {
		t.Fatal("Reset left state")
	}
	small := r.AppendTopic([]byte("x")).AppendPartition(1)
	if small.BaseOffset != -1 || small.LogAppendTime != -1 || small.LogStartOffset != -1 || len(small.RecordErrors) != 0 {
		t.Fatalf("AppendPartition defaults: %+v", small)
	}
	if &r.Topics[0].Partitions[0] != parts {
		t.Fatal("AppendTopic/AppendPartition did not reuse the partitions slice")
	}
	r.Reset()
	if got := testProduceResponseInto(r).AppendTo(nil, 9); !bytes.Equal(got, want) {
		t.Fatal("reused response encodes differently")
	}
}

func testProduceResponseInto(r *ProduceResponse) *ProduceResponse {
	fresh := testProduceResponse()
	r.ThrottleMs = fresh.ThrottleMs
	for _, ft := range fresh.Topics {
		t := r.AppendTopic(ft.Name)
		for _, fp := range ft.Partitions {
			p := t.AppendPartition(fp.Index)
			re := p.RecordErrors
			*p = fp
			p.RecordErrors = append(re, fp.RecordErrors...)
		}
	}
	return r
}

func TestProduceResponseAppendToZeroAllocs(t *testing.T) {
	r := testProduceResponse()
	dst := make([]byte, 0, 4096)
	for _, v := range []int16{3, 8, 9, 12} {
		if n := testing.AllocsPerRun(100, func() {
			dst = r.AppendTo(dst[:0], v)
		}); n != 0 {
			t.Fatalf("v%d: AppendTo allocates %v times", v, n)
		}
	}
}
