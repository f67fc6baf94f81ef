package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnSeen is one record a transaction test consumed, keyed by its (unique) key.
type txnSeen struct {
	partition int32
	offset    int64
	value     string
}

// txnCheckExactly fails unless seen holds exactly the keys of want, each once, with the
// value and (where want knows it, >= 0) partition and offset recorded there.
func txnCheckExactly(t testing.TB, what string, seen map[string][]txnSeen, want map[string]txnSeen) {
	t.Helper()
	var extra, dup, missing []string
	for k, ss := range seen {
		w, ok := want[k]
		if !ok {
			extra = append(extra, k)
			continue
		}
		if len(ss) != 1 {
			dup = append(dup, fmt.Sprintf("%s x%d", k, len(ss)))
			continue
		}
		s := ss[0]
		if s.value != w.value || s.partition != w.partition || (w.offset >= 0 && s.offset != w.offset) {
			t.Errorf("%s: %s read as %d/%d %q, want %d/%d %q", what, k, s.partition, s.offset, s.value, w.partition, w.offset, w.value)
		}
	}
	for k := range want {
		if _, ok := seen[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(extra)
	sort.Strings(dup)
	sort.Strings(missing)
	if len(extra) > 0 {
		t.Errorf("%s: %d records that should not be visible: %v", what, len(extra), extra)
	}
	if len(dup) > 0 {
		t.Errorf("%s: records seen more than once: %v", what, dup)
	}
	if len(missing) > 0 {
		t.Errorf("%s: %d records missing: %v", what, len(missing), missing)
	}
}

// TestConfluentTransactionalProducerAndReadCommitted drives librdkafka's transactional
// producer over a 3-partition topic: 6 transactions alternately committed and aborted, then a
// 7th left open. A read_committed consumer sees exactly the committed records (none of the
// open one until it commits); a read_uncommitted one sees every data record and no control
// record, and each control marker takes one offset.
func TestConfluentTransactionalProducerAndReadCommitted(t *testing.T) {
	b := startBroker(t, nil)
	const (
		topic      = "txn-confluent"
		partitions = 3
		perTxn     = 9 // 3 per partition
		closedTxns = 6
	)
	b.createTopic(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": b.addr,
		"transactional.id":  "inlet-e2e-confluent-txn",
		"linger.ms":         5,
		"log_level":         3,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	go func() {
		for e := range p.Events() {
			if ke, ok := e.(kafka.Error); ok {
				t.Logf("producer event: %v (fatal %v)", ke, ke.IsFatal())
			}
		}
	}()
	step := func(what string, f func(context.Context) error) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
		defer scancel()
		if err := f(sctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("InitTransactions", p.InitTransactions)

	tpc := topic
	all := map[string]txnSeen{}         // every data record produced
	committed := map[string]txnSeen{}   // records of committed transactions
	keysOf := map[int]map[string]bool{} // transaction -> its keys
	// produceTxn produces transaction i's records and waits until every one is acknowledged
	// (so the records are in the log before the transaction ends).
	produceTxn := func(i int) {
		t.Helper()
		step(fmt.Sprintf("BeginTransaction %d", i), func(context.Context) error { return p.BeginTransaction() })
		dr := make(chan kafka.Event, perTxn)
		keysOf[i] = map[string]bool{}
		for j := 0; j < perTxn; j++ {
			k := fmt.Sprintf("tx%d-r%d", i, j)
			keysOf[i][k] = true
			m := &kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &tpc, Partition: int32(j % partitions)},
				Key:            []byte(k),
				Value:          []byte("value-" + k),
			}
			if err := p.Produce(m, dr); err != nil {
				t.Fatalf("produce %s: %v", k, err)
			}
		}
		p.Flush(5000)
		for j := 0; j < perTxn; j++ {
			select {
			case e := <-dr:
				m := e.(*kafka.Message)
				if m.TopicPartition.Error != nil {
					t.Fatalf("delivery of %s: %v", m.Key, m.TopicPartition.Error)
				}
				k := string(m.Key)
				all[k] = txnSeen{partition: m.TopicPartition.Partition, offset: int64(m.TopicPartition.Offset), value: "value-" + k}
			case <-ctx.Done():
				t.Fatalf("transaction %d: %d of %d delivery reports", i, j, perTxn)
			}
		}
		// On each partition transaction i holds offsets 4i..4i+2 and its marker 4i+3.
		for j := 0; j < perTxn; j++ {
			k := fmt.Sprintf("tx%d-r%d", i, j)
			if want := int64(4*i + j/partitions); all[k].offset != want {
				t.Errorf("%s acknowledged at offset %d, want %d", k, all[k].offset, want)
			}
		}
	}
	for i := 0; i < closedTxns; i++ {
		produceTxn(i)
		if i%2 == 0 {
			step(fmt.Sprintf("CommitTransaction %d", i), p.CommitTransaction)
			for k := range keysOf[i] {
				committed[k] = all[k]
			}
		} else {
			step(fmt.Sprintf("AbortTransaction %d", i), p.AbortTransaction)
		}
	}
	// Transaction 6 stays open while the read_committed consumer reads.
	const open = closedTxns
	produceTxn(open)

	newConsumer := func(isolation string) *kafka.Consumer {
		t.Helper()
		c, err := kafka.NewConsumer(&kafka.ConfigMap{
			"bootstrap.servers":    b.addr,
			"group.id":             "inlet-e2e-unused-" + isolation, // required by the binding; no group APIs are used
			"enable.auto.commit":   false,
			"auto.offset.reset":    "earliest",
			"isolation.level":      isolation,
			"enable.partition.eof": true,
			"fetch.wait.max.ms":    100,
			"log_level":            3,
		})
		if err != nil {
			t.Fatal(err)
		}
		var tps []kafka.TopicPartition
		for i := int32(0); i < partitions; i++ {
			tps = append(tps, kafka.TopicPartition{Topic: &tpc, Partition: i, Offset: kafka.OffsetBeginning})
		}
		if err := c.Assign(tps); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// readUntil polls c into seen until every partition has reported EOF since the call
	// began and seen holds at least n distinct keys, then goes on for drain to catch extras.
	readUntil := func(c *kafka.Consumer, seen map[string][]txnSeen, n int, drain time.Duration) {
		t.Helper()
		eof := map[int32]bool{}
		var drainUntil time.Time
		for {
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records, EOF on %d of %d partitions before the deadline", len(seen), n, len(eof), partitions)
			}
			if drainUntil.IsZero() && len(eof) == partitions && len(seen) >= n {
				drainUntil = time.Now().Add(drain)
			}
			if !drainUntil.IsZero() && time.Now().After(drainUntil) {
				return
			}
			switch e := c.Poll(100).(type) {
			case *kafka.Message:
				if e.TopicPartition.Error != nil {
					t.Fatalf("consume: %v", e.TopicPartition.Error)
				}
				k := string(e.Key)
				seen[k] = append(seen[k], txnSeen{partition: e.TopicPartition.Partition, offset: int64(e.TopicPartition.Offset), value: string(e.Value)})
				delete(eof, e.TopicPartition.Partition)
			case kafka.PartitionEOF:
				eof[e.Partition] = true
			case kafka.Error:
				if e.IsFatal() {
					t.Fatalf("consumer: %v", e)
				}
				t.Logf("consumer: %v", e)
			}
		}
	}

	// read_committed with transaction 6 open: the committed records only.
	rc := newConsumer("read_committed")
	defer rc.Close()
	seenRC := map[string][]txnSeen{}
	readUntil(rc, seenRC, len(committed), time.Second)
	for k := range keysOf[open] {
		if _, ok := seenRC[k]; ok {
			t.Errorf("read_committed consumer saw %s of the open transaction", k)
		}
	}
	txnCheckExactly(t, "read_committed, transaction open", seenRC, committed)

	// After the commit the same consumer reads transaction 6 too.
	step("CommitTransaction 6", p.CommitTransaction)
	for k := range keysOf[open] {
		committed[k] = all[k]
	}
	readUntil(rc, seenRC, len(committed), 500*time.Millisecond)
	txnCheckExactly(t, "read_committed after commit", seenRC, committed)

	for i := int32(0); i < partitions; i++ {
		if hw, want := b.highWatermark(topic, i), int64(4*(closedTxns+1)); hw != want {
			t.Errorf("partition %d high watermark %d, want %d (3 records and 1 marker per transaction)", i, hw, want)
		}
	}

	// read_uncommitted: every data record, committed or aborted, and no control record (a
	// control record's key would be an unknown 4-byte key here).
	ru := newConsumer("read_uncommitted")
	defer ru.Close()
	seenRU := map[string][]txnSeen{}
	readUntil(ru, seenRU, len(all), 500*time.Millisecond)
	txnCheckExactly(t, "read_uncommitted", seenRU, all)
}

// TestSaramaTransactionalProducer checks sarama's transactional SyncProducer: two committed
// transactions around an aborted one; a franz-go read_committed consumer then reads exactly
// the committed records, each once, at the offsets sarama was told.
func TestSaramaTransactionalProducer(t *testing.T) {
	b := startBroker(t, nil)
	const (
		topic      = "txn-sarama"
		partitions = 3
		perTxn     = 12
	)
	b.createTopic(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "inlet-e2e"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 10 * time.Second
	cfg.Net.WriteTimeout = 10 * time.Second
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = "inlet-e2e-sarama-txn"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond

	prod, err := sarama.NewSyncProducer([]string{b.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if !prod.IsTransactional() {
		t.Fatal("producer is not transactional")
	}

	all := map[string]txnSeen{}
	committed := map[string]txnSeen{}
	for i, commit := range []bool{true, false, true} {
		if err := prod.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn %d: %v", i, err)
		}
		msgs := make([]*sarama.ProducerMessage, perTxn)
		for j := range msgs {
			k := fmt.Sprintf("tx%d-r%d", i, j)
			msgs[j] = &sarama.ProducerMessage{
				Topic:     topic,
				Partition: int32(j % partitions),
				Key:       sarama.StringEncoder(k),
				Value:     sarama.StringEncoder("value-" + k),
			}
		}
		if err := prod.SendMessages(msgs); err != nil {
			t.Fatalf("SendMessages %d: %v", i, err)
		}
		for j, m := range msgs {
			k := fmt.Sprintf("tx%d-r%d", i, j)
			all[k] = txnSeen{partition: m.Partition, offset: m.Offset, value: "value-" + k}
		}
		if commit {
			if err := prod.CommitTxn(); err != nil {
				t.Fatalf("CommitTxn %d: %v", i, err)
			}
			for j := 0; j < perTxn; j++ {
				k := fmt.Sprintf("tx%d-r%d", i, j)
				committed[k] = all[k]
			}
		} else if err := prod.AbortTxn(); err != nil {
			t.Fatalf("AbortTxn %d: %v", i, err)
		}
	}

	// The last transaction wrote to every partition after the aborted one, so reading all
	// committed records means the consumer went past the aborted range.
	cons := kgoConsume(ctx, t, b.addr, topic, partitions, len(committed), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	extra := txnDrainKgo(ctx, t, b.addr, topic, partitions, kgo.ReadCommitted())
	seen := map[string][]txnSeen{}
	for _, g := range cons {
		seen[string(g.key)] = append(seen[string(g.key)], txnSeen{partition: g.partition, offset: g.offset, value: string(g.value)})
	}
	txnCheckExactly(t, "read_committed", seen, committed)
	txnCheckExactly(t, "read_committed (second consumer)", extra, committed)
}

// txnDrainKgo reads partitions 0..partitions-1 of topic from the start with the given
// isolation level until no record has arrived for a second, and returns the records by key.
func txnDrainKgo(ctx context.Context, t testing.TB, addr, topic string, partitions int32, iso kgo.IsolationLevel) map[string][]txnSeen {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchIsolationLevel(iso),
	)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	seen := map[string][]txnSeen{}
	for {
		if ctx.Err() != nil {
			t.Fatalf("drain: %v", ctx.Err())
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		idle := pctx.Err() != nil
		pcancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			seen[string(r.Key)] = append(seen[string(r.Key)], txnSeen{partition: r.Partition, offset: r.Offset, value: string(r.Value)})
		})
		if n == 0 && idle {
			return seen
		}
	}
}

// TestTransactionalProducerFencedByNewInstance checks fencing with franz-go: a second client
// with the same transactional id initialises while the first has a transaction open; the
// first's commit then fails as fenced, its records stay invisible to read_committed, and the
// second's committed records are visible.
func TestTransactionalProducerFencedByNewInstance(t *testing.T) {
	b := startBroker(t, nil)
	const (
		topic      = "txn-fence"
		partitions = 2
		txnID      = "inlet-e2e-fence"
	)
	b.createTopic(topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	newTxnClient := func() *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(b.addr),
			kgo.TransactionalID(txnID),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
		)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	records := func(tag string, n int) []*kgo.Record {
		out := make([]*kgo.Record, n)
		for i := range out {
			k := fmt.Sprintf("%s-r%d", tag, i)
			out[i] = &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: []byte(k), Value: []byte("value-" + k)}
		}
		return out
	}

	first := newTxnClient()
	defer first.Close()
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	firstRecs := records("first", 6)
	if err := first.ProduceSync(ctx, firstRecs...).FirstErr(); err != nil {
		t.Fatalf("first: produce: %v", err)
	}

	// The second instance's first transactional produce runs InitProducerId, which bumps the
	// epoch and aborts the first's open transaction.
	second := newTxnClient()
	defer second.Close()
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	secondRecs := records("second", 6)
	if err := second.ProduceSync(ctx, secondRecs...).FirstErr(); err != nil {
		t.Fatalf("second: produce: %v", err)
	}

	ectx, ecancel := context.WithTimeout(ctx, 15*time.Second)
	err := first.EndTransaction(ectx, kgo.TryCommit)
	ecancel()
	if err == nil {
		t.Errorf("first: commit after being fenced succeeded")
	} else if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("first: commit after being fenced: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	} else {
		t.Logf("first: commit after being fenced: %v", err)
	}

	if err := second.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("second: commit: %v", err)
	}

	want := map[string]txnSeen{}
	for _, r := range secondRecs {
		want[string(r.Key)] = txnSeen{partition: r.Partition, offset: r.Offset, value: string(r.Value)}
	}
	seen := txnDrainKgo(ctx, t, b.addr, topic, partitions, kgo.ReadCommitted())
	txnCheckExactly(t, "read_committed", seen, want)

	// read_uncommitted still sees the first's (aborted) records.
	for _, r := range firstRecs {
		want[string(r.Key)] = txnSeen{partition: r.Partition, offset: r.Offset, value: string(r.Value)}
	}
	txnCheckExactly(t, "read_uncommitted", txnDrainKgo(ctx, t, b.addr, topic, partitions, kgo.ReadUncommitted()), want)
}
