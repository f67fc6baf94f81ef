package e2e

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// initProducerID asks the broker for an idempotent producer id.
func (rc *rawConn) initProducerID() int64 {
	rc.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		rc.t.Fatalf("InitProducerId: error %d, id %d, epoch %d", resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID
}

// TestIdempotentProduceFollowsProducerStateRules guards exactly-once for idempotent
// producers as the wire sees it (Kafka's ProducerStateManager): a resent batch is answered
// with its original offset and stored once, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an older
// epoch is INVALID_PRODUCER_EPOCH, and a new epoch must start at sequence 0.
func TestIdempotentProduceFollowsProducerStateRules(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "idem"
	b.createTopic(topic, 1)
	rc := dialRaw(t, b.addr)
	pid := rc.initProducerID()
	if other := rc.initProducerID(); other == pid {
		t.Fatalf("two InitProducerId calls returned the same id %d", pid)
	}

	batches := map[string][]byte{}
	steps := []struct {
		name     string
		resend   string // when set, send that step's bytes again
		epoch    int16
		seq      int32
		n        int
		wantCode int16
		wantBase int64
	}{
		{name: "first", epoch: 0, seq: 0, n: 3, wantBase: 0},
		{name: "exact duplicate of the last batch", resend: "first", wantBase: 0},
		{name: "next", epoch: 0, seq: 3, n: 2, wantBase: 3},
		{name: "duplicate of an older batch still in the window", resend: "first", wantBase: 0},
		{name: "gap in sequence", epoch: 0, seq: 10, n: 1, wantCode: 45, wantBase: -1},
		{name: "overlap with stored sequences", epoch: 0, seq: 4, n: 2, wantCode: 45, wantBase: -1},
		{name: "higher epoch starting at sequence 0", epoch: 1, seq: 0, n: 1, wantBase: 5},
		{name: "lower epoch after a higher one", epoch: 0, seq: 5, n: 1, wantCode: 47, wantBase: -1},
		{name: "duplicate from the fenced epoch", resend: "next", wantCode: 47, wantBase: -1},
		{name: "higher epoch not starting at sequence 0", epoch: 2, seq: 3, n: 1, wantCode: 45, wantBase: -1},
		{name: "continue after refusals", epoch: 1, seq: 1, n: 4, wantBase: 6},
	}
	for _, s := range steps {
		var batch []byte
		if s.resend != "" {
			batch = batches[s.resend]
		} else {
			batch = plainBatch(s.n, 1000, s.name).idempotent(pid, s.epoch, s.seq).encode()
			batches[s.name] = batch
		}
		// The server patches baseOffset into the bytes it stores, never into what the
		// client sent: resend an untouched copy.
		p := rc.produceOne(9, topic, 0, append([]byte(nil), batch...))
		if p.ErrorCode != s.wantCode || (s.wantCode == 0 && p.BaseOffset != s.wantBase) {
			t.Fatalf("%s: error %d base offset %d, want error %d base offset %d", s.name, p.ErrorCode, p.BaseOffset, s.wantCode, s.wantBase)
		}
	}
	// Stored once each: 3 + 2 + 1 + 4 records, and a fetch finds exactly those batches.
	b.waitHighWatermark(topic, 0, 10)
	resp := rc.roundTrip(fetchReq(12, topic, 0, 0, 0, 1, 1<<20, 1<<20)).(*kmsg.FetchResponse)
	var bases []int64
	for _, fb := range parseBatches(t, resp.Topics[0].Partitions[0].RecordBatches) {
		bases = append(bases, fb.baseOffset)
	}
	if fmt.Sprint(bases) != "[0 3 5 6]" {
		t.Errorf("stored batches at %v, want [0 3 5 6]", bases)
	}
}

// TestIdempotentDuplicateOfPendingBatchGetsOriginalOffset guards a case the produce path must
// get right: a retry that arrives while the original is still in an unsynced group must wait for
// it and carry its offset, never OUT_OF_ORDER_SEQUENCE_NUMBER (which kgo treats as data
// loss) nor a second copy.
func TestIdempotentDuplicateOfPendingBatchGetsOriginalOffset(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "idem-pending"
	b.createTopic(topic, 1)
	rc := dialRaw(t, b.addr)
	pid := rc.initProducerID()
	const rounds = 20
	var out []byte
	var reqs []kmsg.Request
	var corrs []int32
	for i := 0; i < rounds; i++ {
		batch := plainBatch(2, 1000, fmt.Sprint(i)).idempotent(pid, 0, int32(2*i)).encode()
		// Original and two retries back to back, before any answer.
		for k := 0; k < 3; k++ {
			req := produceReq(12, -1, topic, 0, append([]byte(nil), batch...))
			f, corr := rc.frame(req)
			out = append(out, f...)
			reqs, corrs = append(reqs, req), append(corrs, corr)
		}
	}
	rc.write(out)
	for i := range reqs {
		p := rc.recv(reqs[i], corrs[i]).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if want := int64(2 * (i / 3)); p.ErrorCode != 0 || p.BaseOffset != want {
			t.Fatalf("request %d (round %d copy %d): error %d base offset %d, want 0 and %d", i, i/3, i%3, p.ErrorCode, p.BaseOffset, want)
		}
	}
	b.waitHighWatermark(topic, 0, 2*rounds)
}
