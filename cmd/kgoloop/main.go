// Command kgoloop is the yardstick for loadgen's own cost: the barest kgo producer loop that
// sends what loadgen sends (N clients, idempotent or not, one record value reused, kgo's
// default partitioner, loadgen's linger, buffer and in-flight limit), paced the same way (producer i's record n is due
// at phase_i + n*interval), and nothing else: no per-record bookkeeping, latency histogram,
// verification or live output. scripts/loadgen-cpu-ab.sh runs it against loadgen at one rate
// and prints each one's CPU.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"inlet/loadgen"
)

// pacingQuantum is loadgen's (loadgen/producer.go).
const pacingQuantum = 200 * time.Microsecond

func main() {
	fs := flag.NewFlagSet("kgoloop", flag.ExitOnError)
	brokers := fs.String("brokers", loadgen.DefaultBroker, "seed brokers, comma-separated")
	topic := fs.String("topic", loadgen.DefaultTopic, "topic to produce to (auto-created)")
	producers := fs.Int("producers", loadgen.DefaultProducers, "kgo clients")
	size := fs.Int("record-size", loadgen.DefaultRecordSize, "record value bytes")
	rate := fs.Float64("rate", 0, "records a second over all producers (0: flat out)")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	idempotent := fs.Bool("idempotent", false, "idempotent producers (as loadgen: plain ones keep one request in flight)")
	_ = fs.Bool("quiet", false, "accepted for loadgen's command line; kgoloop prints one line anyway")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kgoloop: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}

	value := make([]byte, *size)
	var acked, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	ctx := context.Background()
	start := time.Now()
	interval := 0.0
	if *rate > 0 {
		interval = float64(*producers) / *rate * float64(time.Second)
	}
	var wg sync.WaitGroup
	for i := 0; i < *producers; i++ {
		opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.DefaultProduceTopic(*topic),
			kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(loadgen.DefaultLinger), kgo.MaxBufferedRecords(loadgen.DefaultMaxBufferedRecords)}
		if !*idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(1))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kgoloop:", err)
			os.Exit(1)
		}
		phase := time.Duration(interval * float64(i) / float64(*producers))
		wg.Go(func() {
			defer cl.Close()
			done := func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				acked.Add(1)
			}
			for n := 0; ; n++ {
				if interval > 0 {
					// Paced as loadgen paces: sleep only while ahead, and then at least
					// loadgen's pacing quantum.
					due := start.Add(phase + time.Duration(float64(n)*interval))
					if d := time.Until(due); d > 0 {
						time.Sleep(max(d, pacingQuantum))
					}
				}
				if time.Since(start) >= *duration {
					break
				}
				cl.Produce(ctx, &kgo.Record{Value: value}, done)
			}
			_ = cl.Flush(ctx)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	fmt.Printf("throughput  %.0f records/s (%d acknowledged, %d failed, %v)\n", float64(acked.Load())/elapsed.Seconds(), acked.Load(), failed.Load(), elapsed.Round(time.Millisecond))
	if e := firstErr.Load(); e != nil {
		fmt.Fprintln(os.Stderr, "kgoloop: first failure:", *e)
		os.Exit(1)
	}
}
