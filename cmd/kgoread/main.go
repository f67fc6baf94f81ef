// Command kgoread is the barest kgo consumer, for profiling the broker's read path
// (profiles/README.md): --consumers clients, the topic's partitions dealt among them and
// assigned directly (no group), read from the start to the high watermarks listed when it
// starts, or with --tail, from the end for that long. It prints the records read, the rate
// and its own CPU time (the clients' share of a machine the read keeps busy), and with
// --cpuprofile writes its own CPU profile over the read. bench compare --consume is the
// measured comparison; this is the load a profile runs under.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"inlet/bench/proc"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "seed broker")
	topic := flag.String("topic", "loadgen", "topic to read")
	consumers := flag.Int("consumers", 4, "consumer clients")
	tail := flag.Duration("tail", 0, "follow the end of the topic for this long instead of reading it from the start")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	partitionMax := flag.Int("partition-max-bytes", 1<<20, "kgo's FetchMaxPartitionBytes: record bytes one fetch asks of a partition")
	cpuProfile := flag.String("cpuprofile", "", "write this process's CPU profile over the read to this file")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	adm, err := kgo.NewClient(kgo.SeedBrokers(*brokers))
	if err != nil {
		fail(err)
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, *topic)
	adm.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		fail(err)
	}
	hw := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { hw[o.Partition] = o.Offset })
	assigned := make([]map[int32]kgo.Offset, *consumers)
	for p := range int32(len(hw)) {
		i := int(p) % *consumers
		if assigned[i] == nil {
			assigned[i] = map[int32]kgo.Offset{}
		}
		if *tail > 0 {
			assigned[i][p] = kgo.NewOffset().AtEnd()
		} else {
			assigned[i][p] = kgo.NewOffset().AtStart()
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer f.Close()
	}
	cpu0 := cpuSeconds()
	var read atomic.Int64
	start := time.Now()
	readCtx := ctx
	if *tail > 0 {
		var stop context.CancelFunc
		readCtx, stop = context.WithTimeout(ctx, *tail)
		defer stop()
	}
	var wg sync.WaitGroup
	for _, parts := range assigned {
		if parts == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(*brokers),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: parts}), kgo.FetchMaxBytes(50<<20),
				kgo.FetchMaxPartitionBytes(int32(*partitionMax)))
			if err != nil {
				fail(err)
			}
			defer cl.Close()
			left := int64(0)
			for p := range parts {
				left += hw[p]
			}
			for readCtx.Err() == nil && (*tail > 0 || left > 0) {
				fs := cl.PollFetches(readCtx)
				fs.EachRecord(func(r *kgo.Record) {
					read.Add(1)
					if r.Offset < hw[r.Partition] {
						left--
					}
				})
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuSeconds() - cpu0
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	fmt.Printf("read %d records in %v: %.0f records/s, client CPU %.2f s\n", read.Load(), elapsed.Round(time.Millisecond),
		float64(read.Load())/elapsed.Seconds(), cpu)
	if *tail == 0 && ctx.Err() != nil {
		fail(fmt.Errorf("timed out before the high watermarks"))
	}
}

// cpuSeconds is this process's user and system CPU time so far.
func cpuSeconds() float64 {
	s, err := proc.SelfCPUSeconds()
	if err != nil {
		fail(err)
	}
	return s
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kgoread:", err)
	os.Exit(1)
}
