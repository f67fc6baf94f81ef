package loadgen

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// onResult is the promise of every record: it must find its accounting through the record's
// Context, mark acks, count errors and recycle the record.
func TestOnResultAccounts(t *testing.T) {
	p := newProducer(2, nil, "t", newValues(FormatRaw, 40, 0), 10)
	p.start = time.Now().Add(-time.Second)

	send := func(seq uint64) *kgo.Record {
		sr := p.free.Get().(*sentRecord)
		PutValueHeader(sr.buf, p.index, seq)
		sr.seq = seq
		sr.intended = 500 * time.Millisecond // 0.5s before now
		sr.rec = kgo.Record{Topic: p.topic, Value: sr.buf, Context: sr}
		return &sr.rec
	}
	p.promise(send(0), nil)
	p.promise(send(1), errors.New("broker said no"))
	p.promise(send(2), nil)
	p.promise(send(3), errors.New("broker said no"))

	if p.acked.Load() != 2 || p.failed.Load() != 2 {
		t.Fatalf("acked %d failed %d", p.acked.Load(), p.failed.Load())
	}
	if !p.ackedSeqs.Has(0) || p.ackedSeqs.Has(1) || !p.ackedSeqs.Has(2) || p.ackedSeqs.Has(3) {
		t.Fatal("acked bitmap does not match the acks")
	}
	errs := map[string]uint64{}
	p.errorCounts(errs)
	if len(errs) != 1 || errs["broker said no"] != 2 {
		t.Fatalf("errors %v", errs)
	}
	var s HistogramSnapshot
	p.latency.Snapshot(&s)
	if s.Total != 2 || s.Quantile(0.5) < 500_000 || s.Quantile(0.5) > 600_000 {
		t.Fatalf("latency count %d p50 %dµs, want 2 records at about 500ms", s.Total, s.Quantile(0.5))
	}

	// A recycled record keeps its padding: only the header is rewritten per send.
	sr := p.free.Get().(*sentRecord)
	PutValueHeader(sr.buf, 2, 99)
	if string(sr.buf) != string(NewValue(40, 2, 99)) {
		t.Fatal("recycled value differs from a fresh one")
	}
}

// A record's Context must never look cancellable to kgo, or kgo would watch it.
func TestSentRecordIsANeverEndingContext(t *testing.T) {
	var sr sentRecord
	if sr.Done() != nil || sr.Err() != nil || sr.Value("k") != nil {
		t.Fatal("sentRecord context is not inert")
	}
	if _, ok := sr.Deadline(); ok {
		t.Fatal("sentRecord context has a deadline")
	}
}

func TestQuotaIsCappedByBitmapCapacity(t *testing.T) {
	if p := newProducer(0, nil, "t", newValues(FormatRaw, 12, 0), 1<<62); p.quota != BitmapCapacity {
		t.Fatalf("quota %d", p.quota)
	}
}

// With several topics each producer cycles through all of them, starting at its own index.
func TestTopicOfCyclesFromProducerIndex(t *testing.T) {
	p := newProducer(2, nil, "t", newValues(FormatRaw, 40, 0), 10)
	if p.topicOf(7) != "t" {
		t.Fatalf("single topic: %q", p.topicOf(7))
	}
	p.topics = []string{"t-0", "t-1", "t-2"}
	var got []string
	for seq := range uint64(4) {
		got = append(got, p.topicOf(seq))
	}
	if strings.Join(got, " ") != "t-2 t-0 t-1 t-2" {
		t.Fatalf("topics %v", got)
	}
}
