package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/server"
)

func fetchPartition(t *testing.T, resp kmsg.Response) kmsg.FetchResponseTopicPartition {
	t.Helper()
	f := resp.(*kmsg.FetchResponse)
	if len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response with %d topics; want one topic, one partition", len(f.Topics))
	}
	return f.Topics[0].Partitions[0]
}

// TestFetchLongPollWaitsOutMaxWaitWithoutData guards the long poll's timeout: with nothing
// to return, a fetch answers after about MaxWaitMillis, neither at once (clients would spin)
// nor never.
func TestFetchLongPollWaitsOutMaxWaitWithoutData(t *testing.T) {
	b := startBroker(t, nil)
	b.createTopic("poll-empty", 1)
	rc := dialRaw(t, b.addr)
	for _, version := range []int16{4, 11, 12} {
		start := time.Now()
		p := fetchPartition(t, rc.roundTrip(fetchReq(version, "poll-empty", 0, 0, 400, 1, 1<<20, 1<<20)))
		took := time.Since(start)
		if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
			t.Errorf("v%d: error %d, %d bytes, high watermark %d; want an empty answer", version, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
		}
		if took < 350*time.Millisecond || took > 3*time.Second {
			t.Errorf("v%d: empty fetch with MaxWait 400ms answered after %v", version, took)
		}
	}
}

// TestFetchLongPollWakesOnProduce guards the commit notification: a consumer waiting at the
// high watermark gets new data as soon as it is committed, not when MaxWait runs out.
func TestFetchLongPollWakesOnProduce(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "poll-wake"
	b.createTopic(topic, 2)
	prod := dialRaw(t, b.addr)
	if p := prod.produceOne(12, topic, 0, plainBatch(2, 1000, "before").encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	cons := dialRaw(t, b.addr)
	type result struct {
		p    kmsg.FetchResponseTopicPartition
		took time.Duration
	}
	done := make(chan result, 1)
	req := fetchReq(12, topic, 0, 2, 5000, 1, 1<<20, 1<<20)
	corr := cons.send(req)
	start := time.Now()
	go func() {
		// recv fails the test through t.Fatal, which must run on the test goroutine; read
		// the frame here and decode there.
		gotCorr, body, err := cons.readFrame(10 * time.Second)
		if err != nil || gotCorr != corr {
			done <- result{took: -1}
			return
		}
		resp, err := decodeResponse(req, body)
		if err != nil {
			done <- result{took: -1}
			return
		}
		done <- result{resp.(*kmsg.FetchResponse).Topics[0].Partitions[0], time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("fetch at the high watermark answered after %v, before anything was produced (%d bytes)", r.took, len(r.p.RecordBatches))
	default:
	}
	// Data on another partition must not end the wait; data on the fetched one must.
	if p := prod.produceOne(12, topic, 1, plainBatch(1, 1000, "elsewhere").encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	time.Sleep(100 * time.Millisecond)
	if p := prod.produceOne(12, topic, 0, plainBatch(3, 1000, "after").encode()); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	r := <-done
	if r.took < 0 {
		t.Fatal("fetch failed")
	}
	if r.took > 2500*time.Millisecond {
		t.Errorf("fetch with MaxWait 5s answered %v after start, though data landed after 300ms", r.took)
	}
	bs := parseBatches(t, r.p.RecordBatches)
	if len(bs) != 1 || bs[0].baseOffset != 2 || len(bs[0].records) != 3 || string(bs[0].records[0].value) != "after-0" {
		t.Errorf("woken fetch returned %+v; want the batch produced at offset 2", bs)
	}
	if r.p.HighWatermark != 5 {
		t.Errorf("high watermark %d, want 5", r.p.HighWatermark)
	}
}

// TestFetchHonoursMinBytes guards MinBytes: with less data than asked for, the fetch waits
// for MaxWait (then returns what there is); with enough, it returns at once.
func TestFetchHonoursMinBytes(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "minbytes"
	b.createTopic(topic, 1)
	rc := dialRaw(t, b.addr)
	batch := plainBatch(4, 1000, "min").encode()
	if p := rc.produceOne(12, topic, 0, batch); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}

	start := time.Now()
	p := fetchPartition(t, rc.roundTrip(fetchReq(12, topic, 0, 0, 500, 1<<20, 4<<20, 4<<20)))
	if took := time.Since(start); took < 450*time.Millisecond || took > 3*time.Second {
		t.Errorf("MinBytes 1 MiB with %d bytes available answered after %v, want about MaxWait (500ms)", len(batch), took)
	}
	if len(p.RecordBatches) != len(batch) {
		t.Errorf("after MaxWait: %d bytes, want the %d available", len(p.RecordBatches), len(batch))
	}

	start = time.Now()
	p = fetchPartition(t, rc.roundTrip(fetchReq(12, topic, 0, 0, 5000, int32(len(batch)), 4<<20, 4<<20)))
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("MinBytes met by stored data, yet the fetch waited %v", took)
	}
	if len(p.RecordBatches) != len(batch) {
		t.Errorf("%d bytes, want %d", len(p.RecordBatches), len(batch))
	}
}

// TestFetchOffsetsAndSizeLimits guards the read path's bounds: an offset past the high
// watermark is OFFSET_OUT_OF_RANGE (a consumer resets on it), a fetch from the middle of a
// batch starts with that whole batch, PartitionMaxBytes and MaxBytes smaller than a batch
// still return the first batch whole (KIP-74), and several batches stop at MaxBytes.
func TestFetchOffsetsAndSizeLimits(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "fetch-limits"
	b.createTopic(topic, 1)
	rc := dialRaw(t, b.addr)
	var sizes []int
	for i := 0; i < 6; i++ {
		s := plainBatch(5, int64(1000*i), fmt.Sprintf("b%d", i))
		for j := range s.records {
			s.records[j].value = append(s.records[j].value, make([]byte, 200)...)
		}
		bb := s.encode()
		sizes = append(sizes, len(bb))
		if p := rc.produceOne(12, topic, 0, bb); p.ErrorCode != 0 || p.BaseOffset != int64(5*i) {
			t.Fatalf("produce %d: error %d base %d", i, p.ErrorCode, p.BaseOffset)
		}
	}
	one := sizes[0] // every batch has the same size

	cases := []struct {
		name              string
		version           int16
		offset            int64
		maxBytes, partMax int32
		wantCode          int16
		wantBases         []int64
	}{
		{name: "from the start, room for all", version: 12, offset: 0, maxBytes: 1 << 20, partMax: 1 << 20, wantBases: []int64{0, 5, 10, 15, 20, 25}},
		{name: "from the middle of a batch", version: 12, offset: 12, maxBytes: 1 << 20, partMax: 1 << 20, wantBases: []int64{10, 15, 20, 25}},
		{name: "last offset", version: 4, offset: 29, maxBytes: 1 << 20, partMax: 1 << 20, wantBases: []int64{25}},
		{name: "at the high watermark", version: 12, offset: 30, maxBytes: 1 << 20, partMax: 1 << 20, wantBases: nil},
		{name: "past the high watermark", version: 12, offset: 31, maxBytes: 1 << 20, partMax: 1 << 20, wantCode: 1},
		{name: "far past the high watermark", version: 4, offset: 1 << 40, maxBytes: 1 << 20, partMax: 1 << 20, wantCode: 1},
		{name: "negative offset", version: 12, offset: -5, maxBytes: 1 << 20, partMax: 1 << 20, wantCode: 1},
		{name: "PartitionMaxBytes below one batch", version: 12, offset: 5, maxBytes: 1 << 20, partMax: 10, wantBases: []int64{5}},
		{name: "MaxBytes below one batch", version: 12, offset: 5, maxBytes: 10, partMax: 1 << 20, wantBases: []int64{5}},
		{name: "MaxBytes of two and a half batches", version: 12, offset: 0, maxBytes: int32(one * 5 / 2), partMax: 1 << 20, wantBases: []int64{0, 5}},
		{name: "PartitionMaxBytes of exactly three batches", version: 11, offset: 0, maxBytes: 1 << 20, partMax: int32(3 * one), wantBases: []int64{0, 5, 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fetchPartition(t, rc.roundTrip(fetchReq(c.version, topic, 0, c.offset, 0, 0, c.maxBytes, c.partMax)))
			if p.ErrorCode != c.wantCode {
				t.Fatalf("error %d, want %d", p.ErrorCode, c.wantCode)
			}
			wantStart := int64(0)
			if c.version < 5 {
				wantStart = -1 // the field arrives in v5
			}
			if p.HighWatermark != 30 || p.LastStableOffset != 30 || p.LogStartOffset != wantStart {
				t.Errorf("high watermark %d, LSO %d, log start %d; want 30, 30, %d", p.HighWatermark, p.LastStableOffset, p.LogStartOffset, wantStart)
			}
			var bases []int64
			for _, fb := range parseBatches(t, p.RecordBatches) {
				bases = append(bases, fb.baseOffset)
				for j, r := range fb.records {
					if want := fmt.Sprintf("b%d-%d", fb.baseOffset/5, j); string(r.value[:len(want)]) != want || r.offset != fb.baseOffset+int64(j) {
						t.Errorf("offset %d holds %q", r.offset, r.value[:len(want)])
					}
				}
			}
			if fmt.Sprint(bases) != fmt.Sprint(c.wantBases) {
				t.Errorf("batches at %v, want %v", bases, c.wantBases)
			}
		})
	}

	t.Run("MaxBytes spent on the first partition leaves the next one empty", func(t *testing.T) {
		b.createTopic("fetch-limits-2", 2)
		for p := int32(0); p < 2; p++ {
			if r := rc.produceOne(12, "fetch-limits-2", p, plainBatch(5, 1000, fmt.Sprint(p)).encode()); r.ErrorCode != 0 {
				t.Fatalf("produce: %d", r.ErrorCode)
			}
		}
		req := fetchReq(12, "fetch-limits-2", 0, 0, 0, 0, 10, 1<<20)
		p1 := req.Topics[0].Partitions[0]
		p1.Partition = 1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("answer has %d topics; want one with two partitions", len(resp.Topics))
		}
		for i, p := range resp.Topics[0].Partitions {
			n := len(parseBatches(t, p.RecordBatches))
			if p.ErrorCode != 0 || p.Partition != int32(i) || n != 1-i || p.HighWatermark != 5 {
				t.Errorf("partition %d: error %d, %d batches, high watermark %d; want 0, %d, 5", p.Partition, p.ErrorCode, n, p.HighWatermark, 1-i)
			}
		}
	})
	t.Run("unknown partition", func(t *testing.T) {
		p := fetchPartition(t, rc.roundTrip(fetchReq(12, topic, 7, 0, 0, 0, 1<<20, 1<<20)))
		if p.ErrorCode != 3 {
			t.Errorf("error %d, want UNKNOWN_TOPIC_OR_PARTITION (3)", p.ErrorCode)
		}
	})
	t.Run("unknown topic", func(t *testing.T) {
		p := fetchPartition(t, rc.roundTrip(fetchReq(12, "no-such-topic", 0, 0, 0, 0, 1<<20, 1<<20)))
		if p.ErrorCode != 3 {
			t.Errorf("error %d, want UNKNOWN_TOPIC_OR_PARTITION (3)", p.ErrorCode)
		}
		if _, ok := b.blog.Topic("no-such-topic"); ok {
			t.Errorf("a fetch created the topic")
		}
	})
}

// TestFetchCappedByFetchMaxBytesAndBudget: a Fetch that asks for more gets at most the
// broker's fetch.max.bytes, and at most what unwritten replies leave of half the in-flight
// budget (transport.Conn.ReplyRoom), whole batches, the first always (KIP-74).
func TestFetchCappedByFetchMaxBytesAndBudget(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(one int) func(*server.Config)
	}{
		{"fetch.max.bytes", func(one int) func(*server.Config) {
			return func(c *server.Config) { c.FetchMaxBytes = 2*one + 1 }
		}},
		{"half the in-flight budget", func(one int) func(*server.Config) {
			return func(c *server.Config) { c.InflightBudget = int64(4*one + 2) }
		}},
		{"fetch.max.bytes below one batch", func(int) func(*server.Config) {
			return func(c *server.Config) { c.FetchMaxBytes = 10 }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Every batch is the same size: 5 records of about 40 KiB.
			mk := func(i int) []byte {
				s := plainBatch(5, int64(1000*i), fmt.Sprintf("b%d", i))
				for j := range s.records {
					s.records[j].value = append(s.records[j].value, make([]byte, 40<<10)...)
				}
				return s.encode()
			}
			one := len(mk(0))
			logger := failureLog(t)
			b := startBroker(t, func(cfg *server.Config) { c.mod(one)(cfg); cfg.Logger = logger })
			const topic = "fetch-capped"
			b.createTopic(topic, 1)
			rc := dialRaw(t, b.addr)
			// A produce reply is charged to the budget until the socket takes it. With the budget
			// at four batches, a produce sent while the last reply is still charged waits unframed,
			// and the connection guard takes a client sending while a reply is unwritten for one
			// that does not read (it closed the connection once under load): so each produce,
			// and the fetch, go once the budget is free.
			budgetFree := func() {
				t.Helper()
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					used, _, ok := b.metricValue("inlet_inflight_budget_used_bytes")
					if !ok {
						t.Fatal("no inlet_inflight_budget_used_bytes")
					}
					if used == 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%v bytes of the in-flight budget still used 5 s after the produces were answered", used)
					}
				}
			}
			for i := 0; i < 6; i++ {
				budgetFree()
				if p := rc.produceOne(12, topic, 0, mk(i)); p.ErrorCode != 0 {
					t.Fatalf("produce %d: error %d", i, p.ErrorCode)
				}
			}
			budgetFree() // the fetch's room is what the budget has free
			p := fetchPartition(t, rc.roundTrip(fetchReq(12, topic, 0, 0, 0, 0, 1<<30, 1<<30)))
			var bases []int64
			for _, fb := range parseBatches(t, p.RecordBatches) {
				bases = append(bases, fb.baseOffset)
			}
			want := []int64{0, 5}
			if c.name == "fetch.max.bytes below one batch" {
				want = []int64{0}
			}
			if fmt.Sprint(bases) != fmt.Sprint(want) {
				t.Errorf("batches at %v, want %v (batch %d bytes)", bases, want, one)
			}
		})
	}
}
