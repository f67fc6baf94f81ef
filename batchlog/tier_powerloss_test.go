package batchlog_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	. "inlet/batchlog"
	"inlet/batchlog/upkeep"
	"inlet/meta"
	"inlet/objstore"
	"inlet/segfs"
	"inlet/tier"
	"inlet/wire"
)

// TestTierPowerLoss: a tiered topic under load, its tier uploading to a bucket that fails and
// loses replies at random, local retention reclaiming what was uploaded, cut by power losses
// (the crashable file systems of the power-loss test) at random moments, with the bucket
// surviving each: the tier's own upload goes on a moment past the cut, as a dying process's
// may. After each restart every acknowledged batch is read, once and in order, across both
// tiers, and once the tier's first pass has run the bucket holds exactly the objects its
// records name: nothing orphaned.
func TestTierPowerLoss(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 23))
	t.Logf("seed %d", seed)
	bucket := objstore.NewMemory()
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	acked := map[int64]byte{} // base offset -> tag
	quiet := slog.New(slog.DiscardHandler)
	cycles := 25
	if testing.Short() {
		cycles = 5
	}
	for cycle := 0; cycle < cycles; cycle++ {
		cat, err := meta.Open(meta.Options{Dir: "/data", FS: pebFS, MemTableSize: 8 << 20, Logger: quiet})
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		l, err := Open(Options{Dir: "/data", Meta: cat, Layout: LayoutSegments, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20,
			SegmentBytes: 16 << 10, SegmentFS: segFS, PebbleFS: pebFS, Logger: quiet, OnFatal: func(err error) { t.Errorf("log failed: %v", err) }})
		if err != nil {
			t.Fatalf("cycle %d: reopen: %v", cycle, err)
		}
		topic, ok := l.Topic("t")
		if !ok {
			if len(acked) > 0 {
				t.Fatalf("cycle %d: topic lost", cycle)
			}
			topic, err = l.CreateTopic("t", 1, map[string]string{"remote.storage.enable": "true", "local.retention.bytes": "16384", "retention.ms": "-1"})
			if err != nil {
				t.Fatal(err)
			}
		}
		tr, err := tier.Open(l, cat, tier.Config{Bucket: bucket, ObjectBytes: 8 << 10, UploadInterval: time.Millisecond,
			PassInterval: time.Millisecond, RetentionInterval: -1, ChunkBytes: 4 << 10, RetryMax: 5 * time.Millisecond, CallTimeout: time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		// The first pass, by hand: the clean, then the uploads. The bucket then holds the
		// recorded objects and nothing else.
		// Faults injected before the cut may be left: the pass is tried until it succeeds, as
		// the loop retries it.
		for attempt := 0; ; attempt++ {
			err := tr.RunOnce(context.Background(), time.Now())
			if err == nil {
				break
			}
			if attempt == 5 {
				t.Fatalf("cycle %d: first pass: %v", cycle, err)
			}
		}
		var objects int
		for _, k := range bucket.Keys() {
			if !strings.HasSuffix(k, ".json") {
				objects++
			}
		}
		if int64(objects) != tr.Stats().RemoteObjects {
			t.Fatalf("cycle %d: bucket holds %d objects, the records name %d", cycle, objects, tr.Stats().RemoteObjects)
		}
		checkTiered(t, cycle, l, tr, topic.Partitions[0], acked)

		bucket.FailNext(objstore.OpPut, rng.IntN(3), errors.New("injected: 503"))
		bucket.LoseNextReply(objstore.OpPut, rng.IntN(2), errors.New("injected: reply lost"))
		tr.Start()
		u := upkeep.Start(l, upkeep.Config{RetentionCheckInterval: time.Millisecond, Tier: tr})
		var mu sync.Mutex
		crashed := false
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		prng := rand.New(rand.NewPCG(rng.Uint64(), 1))
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tag := byte(prng.IntN(250) + 1)
				a := stampedBatch(topic.Partitions[0], 4, time.Now().UnixMilli(), 1024, tag)
				done := make(chan struct{})
				r := &Request{Appends: []Append{a}, Done: func(*Request) { close(done) }}
				l.Submit(r)
				select {
				case <-done:
				case <-stop:
					return
				}
				mu.Lock()
				if !crashed && r.Appends[0].Err == wire.ErrNone {
					acked[r.Appends[0].BaseOffset] = tag
				}
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(5+rng.IntN(40)) * time.Millisecond)
		mode := []segfs.CrashMode{segfs.SyncedOnly, segfs.TornPrefix, segfs.RandomBlocks}[rng.IntN(3)]
		mu.Lock()
		crashed = true // answers from now on are never seen by a producer
		mu.Unlock()
		var pebAfter *vfs.MemFS
		segAfter := segFS.Crash(mode, rng, func() {
			pebAfter = pebFS.CrashClone(vfs.CrashCloneCfg{RNG: rng})
		})
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // the dying tier's last uploads
		close(stop)
		wg.Wait()
		tr.Close()
		u.Close()
		l.Close()
		segFS, pebFS = segAfter, pebAfter
	}
	t.Logf("%d batches acknowledged over %d power losses; %+v", len(acked), cycles, bucket.Calls(objstore.OpPut))
}

// checkTiered reads p from its log start across both tiers and checks that every acknowledged
// batch is there, once, in order, with its tag.
func checkTiered(t *testing.T, cycle int, l *Log, tr *tier.Tier, p *Partition, acked map[int64]byte) {
	t.Helper()
	found := map[int64]byte{}
	last := int64(-1)
	for off := p.LogStartOffset(); off < p.HighWatermark(); {
		var plan ReadPlan
		var err error
		if off < p.LocalLogStartOffset() {
			err = tr.PlanRead(p, off, p.HighWatermark(), 64<<10, true, &plan)
		} else {
			err = l.PlanRead(p, off, p.HighWatermark(), 64<<10, true, &plan)
		}
		if err != nil {
			t.Fatalf("cycle %d: read at %d (local start %d): %v", cycle, off, p.LocalLogStartOffset(), err)
		}
		buf, err := l.AppendPlanned(nil, &plan)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			t.Fatalf("cycle %d: nothing read at %d, high watermark %d", cycle, off, p.HighWatermark())
		}
		for len(buf) > 0 {
			batch, rest, err := wire.NextBatch(buf)
			if err != nil || batch == nil {
				t.Fatalf("cycle %d: batch at %d: %v", cycle, off, err)
			}
			buf = rest
			h, _ := wire.ParseBatchHeader(batch)
			if h.BaseOffset <= last {
				t.Fatalf("cycle %d: batch %d read after %d", cycle, h.BaseOffset, last)
			}
			last = h.BaseOffset
			found[h.BaseOffset] = batch[61]
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		}
	}
	for base, tag := range acked {
		if base < p.LogStartOffset() {
			continue
		}
		if got, ok := found[base]; !ok || got != tag {
			t.Fatalf("cycle %d: acknowledged batch at %d (tag %d) read as %d, %v; log start %d, local start %d, uploaded end %d, hw %d",
				cycle, base, tag, got, ok, p.LogStartOffset(), p.LocalLogStartOffset(), tr.UploadedEnd(p), p.HighWatermark())
		}
	}
}
