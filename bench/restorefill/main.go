// Command restorefill fills a bucket for a diskless restore benchmark, and waits for a
// restored node to serve (scripts/diskless-restore-bench.sh runs both).
//
//	restorefill fill --s3-endpoint URL --s3-bucket B --dir DIR --partitions N --bytes S --producers P
//	    a node in this process (the log, the diskless committer and the remote tier, wired as
//	    cmd/inlet wires them) creates a diskless topic "restore" of N partitions, writes S bytes
//	    of batches to each (1 MiB batches, no producer id) and one idempotent batch for each of
//	    P producer ids (spread over the partitions), waits until the tier has uploaded every
//	    partition and a checkpoint covers every commit object, and closes.
//	restorefill wait --addr HOST:PORT --t0 UNIXNANO --partitions N
//	    asks Metadata until the broker names topic "restore" with N partitions, then prints the
//	    time since t0.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"inlet/batchlog"
	"inlet/bytesize"
	"inlet/diskless"
	"inlet/objstore"
	"inlet/tier"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: restorefill fill|wait [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	endpoint := fs.String("s3-endpoint", "", "S3 endpoint")
	bucketName := fs.String("s3-bucket", "", "bucket")
	dir := fs.String("dir", "", "data directory of the filling node")
	partitions := fs.Int("partitions", 16, "partitions of topic restore")
	size := fs.String("bytes", "256MiB", "batch data per partition")
	producers := fs.Int("producers", 100000, "idempotent producer ids, one batch each")
	tail := fs.String("tail", "0", "batch data per partition written after the checkpoint (in commit objects only: replayed by the restore)")
	addr := fs.String("addr", "", "the restored broker (wait)")
	t0 := fs.Int64("t0", 0, "unix ns the restored broker was started at (wait)")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "fill":
		var s, t int64
		if s, err = bytesize.Parse(*size); err == nil {
			if t, err = bytesize.ParseOrZero(*tail); err == nil {
				err = fill(*endpoint, *bucketName, *dir, *partitions, s, t, *producers)
			}
		}
	case "wait":
		err = wait(*addr, *t0, *partitions)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "restorefill:", err)
		os.Exit(1)
	}
}

// batch is a record batch of n records (no producer id when pid < 0) with payload bytes of
// body, its length and CRC fields right; the broker reads only its header.
func batch(pid int64, seq, n int32, body int) []byte {
	b := make([]byte, 61+body)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	now := time.Now().UnixMilli()
	binary.BigEndian.PutUint64(b[27:], uint64(now))
	binary.BigEndian.PutUint64(b[35:], uint64(now))
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], 0)
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func fill(endpoint, bucketName, dir string, partitions int, size, tail int64, producers int) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	bucket, err := objstore.OpenS3(ctx, objstore.S3Config{Bucket: bucketName, Endpoint: endpoint, Region: "us-east-1", PathStyle: true})
	if err != nil {
		return err
	}
	var tr atomic.Pointer[tier.Tier]
	c := diskless.New(diskless.Config{Bucket: bucket, NodeID: 1, Logger: logger, CheckpointInterval: time.Second,
		UploadedEnd: func(p *batchlog.Partition) int64 {
			if t := tr.Load(); t != nil {
				return t.UploadedEnd(p)
			}
			return 0
		}})
	l, err := batchlog.Open(batchlog.Options{Dir: dir, Diskless: c, Logger: logger, MaxProducerWindows: producers + 1})
	if err != nil {
		return err
	}
	defer c.Close()
	defer l.Close()
	if _, err := c.Recover(ctx, l); err != nil {
		return err
	}
	// The tier's defaults (64 MiB objects, or what waited 60 s), as a node's.
	t, err := tier.Open(l, l.Meta(), tier.Config{Bucket: bucket, PassInterval: 200 * time.Millisecond, Logger: logger})
	if err != nil {
		return err
	}
	tr.Store(t)
	t.Start()
	defer t.Close()
	tp, err := l.CreateTopicBy("restore", partitions, map[string]string{"diskless.enable": "true"}, "")
	if err != nil {
		return err
	}
	if err := c.Describe(ctx, tp); err != nil {
		return err
	}
	began := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int32
	// Answered as a produce is (Completion): once the batches are in a commit object.
	submit := func(appends []batchlog.Append, then func()) {
		wg.Add(1)
		l.Submit(&batchlog.Request{Appends: appends, Completion: completion(func(r *batchlog.Request) {
			for _, a := range r.Appends {
				if a.Err != 0 {
					failed.Store(int32(a.Err))
				}
			}
			if then != nil {
				then()
			}
			wg.Done()
		})})
	}
	// Producer ids first: their windows are the oldest batches, deep in the tier.
	for from := 0; from < producers; from += 1000 {
		var as []batchlog.Append
		for pid := from; pid < min(from+1000, producers); pid++ {
			p := tp.Partitions[pid%partitions]
			as = append(as, batchlog.Append{Partition: p, Batch: batch(int64(pid), 0, 1, 40), ProducerID: int64(pid), BaseSequence: 0, NumRecords: 1})
		}
		submit(as, nil)
	}
	const batchBytes = 1 << 20
	inflight := make(chan struct{}, 8) // 8 MiB of each partition's batches in flight
	write := func(size int64) {
		for written := int64(0); written < size; written += batchBytes {
			for _, p := range tp.Partitions {
				inflight <- struct{}{}
				submit([]batchlog.Append{{Partition: p, Batch: batch(-1, -1, 100, batchBytes-61), ProducerID: -1, BaseSequence: -1, NumRecords: 100}},
					func() { <-inflight })
			}
		}
		wg.Wait()
	}
	write(size)
	if code := failed.Load(); code != 0 {
		return fmt.Errorf("an append failed: error %d", code)
	}
	fmt.Printf("filled %d partitions x %s and %d producer ids in %.1fs (%d commit objects)\n", partitions,
		fmt.Sprintf("%d MiB", size>>20), producers, time.Since(began).Seconds(), c.Stats().Puts.Load())
	landed := uint64(c.Stats().Puts.Load())
	for {
		uploaded := true
		for _, p := range tp.Partitions {
			uploaded = uploaded && t.UploadedEnd(p) == p.HighWatermark()
		}
		// A fresh bucket: the checkpoints' deletions are done once they count every object.
		if st := c.CheckpointStats(); uploaded && st.Last >= landed && st.DeletedObjects >= int(st.Last) {
			fmt.Printf("tier uploaded and checkpoint %d written after %.1fs: %d bytes, %d windows, %d commit objects deleted\n",
				st.Last, time.Since(began).Seconds(), st.LastBytes, st.Windows, st.DeletedObjects)
			break
		}
		if time.Since(began) > 30*time.Minute {
			return fmt.Errorf("no checkpoint covering the log: %+v", c.CheckpointStats())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if tail > 0 {
		t.Close() // the tail stays in commit objects only
		write(tail)
		fmt.Printf("tail: %d MiB per partition after the checkpoint, in commit objects only\n", tail>>20)
	}
	n, objects := 0, 0
	err = bucket.List(ctx, "", func(key string, sz int64) error {
		n++
		if strings.HasPrefix(key, diskless.LogPrefix) {
			objects++
		}
		return nil
	})
	fmt.Printf("bucket: %d keys, %d commit objects\n", n, objects)
	return err
}

func wait(addr string, t0 int64, partitions int) error {
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req := kmsg.NewPtrMetadataRequest()
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("restore")
		req.Topics = append(req.Topics, topic)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		cl.Close()
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) == partitions {
			fmt.Printf("serving: Metadata answered with topic restore's %d partitions %.2fs after the start\n", partitions,
				float64(time.Now().UnixNano()-t0)/1e9)
			return nil
		}
	}
	return fmt.Errorf("no Metadata answer naming topic restore from %s", addr)
}

type completion func(*batchlog.Request)

func (c completion) Completed(r *batchlog.Request) { c(r) }
