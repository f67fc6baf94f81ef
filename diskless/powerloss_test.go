package diskless

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/objstore"
	"inlet/segfs"
	"inlet/wire"
)

// TestDisklessPowerLoss: diskless topics on the crashable file systems (segments and Pebble,
// cut at one instant), their bucket an objstore.Memory that outlives every cut, slow (PUTs
// in flight at the cut), failing PUTs and losing PUT replies at random. Producers run through
// short commit windows; power is cut at a random moment, the dying node's calls already sent
// to the bucket land (or fail) while nothing more leaves it, and the node restarts on the
// same disk. After each restart, every acknowledged batch is read from the log exactly once,
// at the offset it was acknowledged with and in order, and the log agrees with the bucket:
// the commit objects hold each partition's batches from 0 to its high watermark, each offset
// once, byte for byte as the log serves it.
func TestDisklessPowerLoss(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 35))
	t.Logf("seed %d", seed)
	mem := objstore.NewMemory()
	segFS, pebFS := segfs.NewCrashableMem(), vfs.NewCrashableMem()
	acked := map[int32][]ackedBatch{} // partition -> acknowledged batches
	var nextID atomic.Uint32
	cycles := 12
	if testing.Short() {
		cycles = 4
	}
	for cycle := 0; cycle <= cycles; cycle++ {
		bucket := &mortal{Bucket: mem}
		cat, err := meta.Open(meta.Options{Dir: "/data", FS: pebFS, MemTableSize: 8 << 20, Logger: quiet})
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		c := New(Config{Bucket: bucket, Logger: quiet, CommitInterval: time.Duration(2+rng.IntN(20)) * time.Millisecond,
			CommitBytes: 2 << 10, RequestTimeout: 10 * time.Second, CloseTimeout: 20 * time.Millisecond})
		l, err := batchlog.Open(batchlog.Options{Dir: "/data", Meta: cat, Layout: batchlog.LayoutSegments, MaxGroupBytes: 1 << 20,
			MemTableSize: 8 << 20, SegmentBytes: 16 << 10, SegmentFS: segFS, PebbleFS: pebFS, Diskless: c, Logger: quiet})
		if err != nil {
			t.Fatalf("cycle %d: reopen: %v", cycle, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := c.Recover(ctx, l)
		cancel()
		if err != nil {
			t.Fatalf("cycle %d: recover: %v", cycle, err)
		}
		tp, ok := l.Topic("d")
		if !ok {
			if len(acked) > 0 {
				t.Fatalf("cycle %d: topic lost", cycle)
			}
			if tp, err = l.CreateTopic("d", 2, map[string]string{"diskless.enable": "true"}); err != nil {
				t.Fatal(err)
			}
			if err := c.Describe(context.Background(), tp); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range tp.Partitions {
			checkPowerLoss(t, cycle, l, mem, tp, p, acked[p.Index])
		}
		t.Logf("cycle %d: recovered %+v, high watermarks %d, %d", cycle, st, tp.Partitions[0].HighWatermark(), tp.Partitions[1].HighWatermark())
		if cycle == cycles {
			l.Close()
			c.Close()
			break
		}

		// Faults for this run: a slow bucket, failed PUTs, PUTs that land with the reply lost.
		mem.SetDelay(time.Duration(rng.IntN(8)) * time.Millisecond)
		mem.FailNext(objstore.OpPut, rng.IntN(3), errors.New("injected: 503"))
		mem.LoseNextReply(objstore.OpPut, rng.IntN(3), errors.New("injected: reply lost"))
		var mu sync.Mutex
		crashed := false
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(p *batchlog.Partition) {
				defer wg.Done()
				for {
					id := nextID.Add(1)
					pr := &produce{done: make(chan struct{})}
					pr.r.Appends = []batchlog.Append{{Partition: p, Batch: idBatch(id), ProducerID: -1, BaseSequence: -1, NumRecords: 2}}
					pr.r.Completion = pr
					l.Submit(&pr.r)
					select {
					case <-pr.done:
					case <-stop:
						return
					}
					a := pr.r.Appends[0]
					mu.Lock()
					if !crashed && a.Err == wire.ErrNone {
						acked[p.Index] = append(acked[p.Index], ackedBatch{a.BaseOffset, id})
					}
					mu.Unlock()
				}
			}(tp.Partitions[w%2])
		}
		time.Sleep(time.Duration(20+rng.IntN(200)) * time.Millisecond)
		mode := []segfs.CrashMode{segfs.SyncedOnly, segfs.TornPrefix, segfs.RandomBlocks}[rng.IntN(3)]
		mu.Lock()
		crashed = true // answers from now on are never seen by a producer
		mu.Unlock()
		var pebAfter *vfs.MemFS
		segAfter := segFS.Crash(mode, rng, func() {
			pebAfter = pebFS.CrashClone(vfs.CrashCloneCfg{RNG: rng})
		})
		// The calls the dying node had sent land (a delayed PUT among them, its reply maybe
		// lost); nothing it tries from now on reaches the bucket.
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		bucket.die()
		close(stop)
		wg.Wait()
		l.Close()
		c.Close()
		mem.SetDelay(0)
		segFS, pebFS = segAfter, pebAfter
	}
	var n int
	for _, a := range acked {
		n += len(a)
	}
	t.Logf("%d batches acknowledged over %d power losses; %d PUTs", n, cycles, mem.Calls(objstore.OpPut))
	if n == 0 {
		t.Fatal("nothing was acknowledged: the test tested nothing")
	}
}

// checkPowerLoss reads p whole and checks it against what was acknowledged and against the
// commit objects in the bucket.
func checkPowerLoss(t *testing.T, cycle int, l *batchlog.Log, mem *objstore.Memory, tp *batchlog.Topic, p *batchlog.Partition, acked []ackedBatch) {
	t.Helper()
	hw := p.HighWatermark()
	local := map[int64][]byte{} // base offset -> batch, as the log serves it
	seen := map[uint32]int64{}
	var data []byte
	for off := int64(0); off < hw; {
		var err error
		data, err = l.ReadBatches(p, off, hw, 64<<10, true, data[:0])
		if err != nil || len(data) == 0 {
			t.Fatalf("cycle %d: partition %d: read at %d of %d: %v", cycle, p.Index, off, hw, err)
		}
		for len(data) > 0 {
			batch, rest, err := wire.NextBatch(data)
			if err != nil || batch == nil {
				t.Fatalf("cycle %d: partition %d: batch at %d: %v", cycle, p.Index, off, err)
			}
			data = rest
			h, _ := wire.ParseBatchHeader(batch)
			if h.BaseOffset != off {
				t.Fatalf("cycle %d: partition %d: batch at %d where %d was next", cycle, p.Index, h.BaseOffset, off)
			}
			id := binary.BigEndian.Uint32(batch[61:])
			if at, dup := seen[id]; dup {
				t.Fatalf("cycle %d: partition %d: batch %d stored twice, at %d and %d", cycle, p.Index, id, at, off)
			}
			seen[id] = off
			local[off] = append([]byte(nil), batch...)
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		}
	}
	for _, a := range acked {
		if at, ok := seen[a.id]; !ok || at != a.base {
			t.Fatalf("cycle %d: partition %d: acknowledged batch %d at %d: read at %d (%v); high watermark %d", cycle, p.Index, a.id, a.base, at, ok, hw)
		}
	}
	// The bucket: the objects of the log, one writer's, each offset of p once, in order, from
	// 0 to hw (objects past a gap that a power cut left with PUTs in flight are void).
	next := int64(0)
	for i, es := range logOf(t, mem) {
		for _, e := range es {
			if e.TopicID != tp.ID || e.Partition != p.Index {
				continue
			}
			h, _ := wire.ParseBatchHeader(e.Batch)
			if e.Base != next {
				t.Fatalf("cycle %d: partition %d: the log's object %d holds a batch at %d where %d was next", cycle, p.Index, i+1, e.Base, next)
			}
			if got := local[e.Base]; !bytes.Equal(got, e.Batch) {
				t.Fatalf("cycle %d: partition %d: the log's object %d: its batch at %d is not the local log's", cycle, p.Index, i+1, e.Base)
			}
			next = e.Base + int64(h.LastOffsetDelta) + 1
		}
	}
	if next != hw {
		t.Fatalf("cycle %d: partition %d: the bucket holds offsets up to %d, the log %d", cycle, p.Index, next, hw)
	}
}

// ackedBatch is a batch acknowledged at base.
type ackedBatch struct {
	base int64
	id   uint32
}

// idBatch is a record-batch-shaped value of 2 records with no producer, told apart by id.
func idBatch(id uint32) []byte {
	b := make([]byte, 65)
	binary.BigEndian.PutUint32(b[61:], id)
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))
	binary.BigEndian.PutUint32(b[53:], ^uint32(0))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], 1)
	binary.BigEndian.PutUint32(b[57:], 2)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// mortal is the bucket as one node's process sees it: once the node has died, nothing it
// sends reaches the bucket (die waits for the calls already sent, which land or fail).
type mortal struct {
	objstore.Bucket
	mu   sync.RWMutex
	dead bool
}

var errDead = errors.New("injected: the node lost power")

// enter holds off die until the call returns; false once the node is dead.
func (m *mortal) enter() bool {
	m.mu.RLock()
	if m.dead {
		m.mu.RUnlock()
		return false
	}
	return true
}

func (m *mortal) die() {
	m.mu.Lock()
	m.dead = true
	m.mu.Unlock()
}

func (m *mortal) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	if !m.enter() {
		return errDead
	}
	defer m.mu.RUnlock()
	return m.Bucket.Put(ctx, key, body, size)
}

func (m *mortal) ReadAt(ctx context.Context, key string, off int64, dst []byte) error {
	if !m.enter() {
		return errDead
	}
	defer m.mu.RUnlock()
	return m.Bucket.ReadAt(ctx, key, off, dst)
}

func (m *mortal) List(ctx context.Context, prefix string, fn func(string, int64) error) error {
	if !m.enter() {
		return errDead
	}
	defer m.mu.RUnlock()
	return m.Bucket.List(ctx, prefix, fn)
}

func (m *mortal) Delete(ctx context.Context, key string) error {
	if !m.enter() {
		return errDead
	}
	defer m.mu.RUnlock()
	return m.Bucket.Delete(ctx, key)
}

func (m *mortal) PutIf(ctx context.Context, key string, body io.ReadSeeker, size int64, ifMatch string) (string, error) {
	if !m.enter() {
		return "", errDead
	}
	defer m.mu.RUnlock()
	return m.Bucket.PutIf(ctx, key, body, size, ifMatch)
}

func (m *mortal) Get(ctx context.Context, key string) ([]byte, string, error) {
	if !m.enter() {
		return nil, "", errDead
	}
	defer m.mu.RUnlock()
	return m.Bucket.Get(ctx, key)
}

// TestRecoverRidesOutAFailedDescription: a restart whose topic description PUT fails once, or
// lands with its reply lost, or whose listing of the commit log or reads of its objects fail
// twice, still starts (each call is tried again), and serves.
func TestRecoverRidesOutAFailedDescription(t *testing.T) {
	for _, fault := range []func(*objstore.Memory){
		func(m *objstore.Memory) { m.FailNext(objstore.OpPut, 1, errors.New("injected: 503")) },
		func(m *objstore.Memory) { m.LoseNextReply(objstore.OpPut, 1, errors.New("injected: reply lost")) },
		// The commit log's listing and its objects' reads at start fail too, then answer.
		func(m *objstore.Memory) { m.FailNext(objstore.OpList, 2, errors.New("injected: 503 on list")) },
		func(m *objstore.Memory) { m.FailNext(objstore.OpReadAt, 2, errors.New("injected: connection cut")) },
	} {
		m := objstore.NewMemory()
		dir := t.TempDir()
		n := openNode(t, dir, m, Config{}, false)
		tp := n.topic("d", true)
		if a := n.send(appendOf(tp.Partitions[0], -1, 0, 1, 1)).wait(t, 5*time.Second); a.Err != 0 {
			t.Fatalf("err %d", a.Err)
		}
		n.close()
		fault(m)
		n = openNode(t, dir, m, Config{}, false) // fails the test if Recover fails
		if a := n.send(appendOf(n.mustTopic("d").Partitions[0], -1, 0, 1, 2)).wait(t, 5*time.Second); a.Err != 0 || a.BaseOffset != 1 {
			t.Fatalf("after the restart: err %d base %d", a.Err, a.BaseOffset)
		}
		n.close()
	}
}

func (n *node) mustTopic(name string) *batchlog.Topic {
	tp, ok := n.l.Topic(name)
	if !ok {
		n.t.Fatalf("topic %s lost", name)
	}
	return tp
}
