package tier

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"inlet/batchlog"
	"inlet/meta"
)

// Remote reads. A Fetch at an offset below the local log start comes here (PlanRead): the
// recorded object that holds the offset names its footer, read once and cached; the footer
// names the batches from the offset on, and they are read a chunk at a time (about
// Config.ChunkBytes of whole batches, one ranged GET each), cached too. The plan references
// the cached bytes (batchlog.ReadPlan.AddShared), which are never changed, so a reply is
// copied from them once, into its frame. When a read reaches into a chunk, the next chunk of
// the object is read ahead in the background, so a consumer reading on finds it cached; the
// chunks a read has passed go to the back of the cache (drop-behind), so that with many
// partitions read at once the chunks read ahead are not evicted before they are used.
//
// One fetch partition reads from one object: a consumer goes on to the next object with its
// next fetch, and to the local log once it passes the local log start.

// readTimeout bounds a remote read made for a fetch.
const readTimeout = 10 * time.Second

// ErrRemote wraps a failed read of the bucket: the fetch is answered KAFKA_STORAGE_ERROR,
// which consumers retry.
var ErrRemote = errors.New("tier: remote read failed")

// footer is an object's decoded footer and the chunks its batches are read in.
type footer struct {
	entries []entry
	chunks  []int // chunks[c]: the entry chunk c starts at
}

// chunkOf is the chunk that holds entry i.
func (f *footer) chunkOf(i int) int {
	return sort.Search(len(f.chunks), func(c int) bool { return f.chunks[c] > i }) - 1
}

// span is chunk c's byte range in the object.
func (f *footer) span(c int, dataLen int64) (off, end int64) {
	off = int64(f.entries[f.chunks[c]].pos)
	end = dataLen
	if c+1 < len(f.chunks) {
		end = int64(f.entries[f.chunks[c+1]].pos)
	}
	return off, end
}

func newFooter(entries []entry, chunkBytes int) *footer {
	f := &footer{entries: entries}
	size := chunkBytes
	for i, e := range entries {
		if size >= chunkBytes {
			f.chunks = append(f.chunks, i)
			size = 0
		}
		size += int(e.size)
	}
	return f
}

// PlanRead adds to plan the batches of p's remote objects from the one that holds offset:
// batches with a base below limit, up to maxBytes (the first whatever its size when
// includeFirst is set), as batchlog.Log.PlanRead does for local batches. It reads from one
// object. batchlog.ErrOffsetOutOfRange: no recorded object holds offset or comes after it.
func (t *Tier) PlanRead(p *batchlog.Partition, offset, limit int64, maxBytes int, includeFirst bool, plan *batchlog.ReadPlan) error {
	o, ok := t.find(p.ID, offset)
	if !ok {
		return batchlog.ErrOffsetOutOfRange
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	f, err := t.footer(ctx, o)
	if err != nil {
		return err
	}
	i := sort.Search(len(f.entries), func(i int) bool { return f.entries[i].end() > offset })
	plan.End = min(limit, o.End)
	lastChunk := -1
	var passed []int // chunks the plan read to their end
	var chunk []byte
	var chunkAt int64
	for ; i < len(f.entries); i++ {
		e := f.entries[i]
		if e.base >= limit {
			plan.End = e.base
			break
		}
		if (plan.Bytes > 0 || !includeFirst) && plan.Bytes+int(e.size) > maxBytes {
			plan.End = e.base
			break
		}
		if c := f.chunkOf(i); c != lastChunk {
			if lastChunk >= 0 {
				passed = append(passed, lastChunk)
			}
			chunk, err = t.chunk(ctx, o, f, c)
			if err != nil {
				return err
			}
			lastChunk = c
			chunkAt, _ = f.span(c, o.DataLen)
		}
		at := int64(e.pos) - chunkAt
		plan.AddShared(chunk[at : at+int64(e.size)])
		if plan.Bytes >= maxBytes {
			plan.End = e.base + 1
			break
		}
	}
	if lastChunk >= 0 && (i == len(f.entries) || f.chunkOf(i) != lastChunk) {
		passed = append(passed, lastChunk) // read to its end too
	}
	// Drop-behind: a consumer reading on does not come back for what it has passed, so
	// those chunks go first when the cache is full, and the chunks read ahead for every
	// partition being read stay.
	for _, c := range passed {
		t.cache.demote(cacheKey{o.Key, c})
	}
	if lastChunk >= 0 && lastChunk+1 < len(f.chunks) {
		t.readAhead(o, f, lastChunk+1)
	}
	t.stats.readBytes.Add(int64(plan.Bytes))
	return nil
}

// FindTimestamp is the first batch of p's remote objects whose max timestamp is at least
// target (nil: none is), for ListOffsets by timestamp; the caller finds the record in it.
// The batch is valid until the cache drops it: the caller must not keep it.
func (t *Tier) FindTimestamp(p *batchlog.Partition, target int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	for _, o := range t.objectsOf(p.ID) {
		if o.MaxTimestamp < target || o.End <= p.LogStartOffset() {
			continue
		}
		f, err := t.footer(ctx, o)
		if err != nil {
			return nil, err
		}
		for i, e := range f.entries {
			if e.maxTimestamp < target || e.end() <= p.LogStartOffset() {
				continue
			}
			return t.batch(ctx, o, f, i)
		}
	}
	return nil, nil
}

// MaxTimestampBatch is the data batch (not a transaction marker) of p's remote objects at or
// past its log start with the largest max timestamp, the first of them on a tie (nil: none),
// for ListOffsets' MAX_TIMESTAMP; the caller finds the record in it and compares it with the
// local batches'. Valid until the cache drops it: the caller must not keep it.
func (t *Tier) MaxTimestampBatch(p *batchlog.Partition) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var bestObj meta.RemoteObject
	var bestFooter *footer
	best, bestTS := -1, int64(-1)
	for _, o := range t.objectsOf(p.ID) {
		if o.MaxTimestamp <= bestTS || o.End <= p.LogStartOffset() {
			continue
		}
		f, err := t.footer(ctx, o)
		if err != nil {
			return nil, err
		}
		for i, e := range f.entries {
			if e.maxTimestamp > bestTS && !e.control() && e.end() > p.LogStartOffset() {
				bestObj, bestFooter, best, bestTS = o, f, i, e.maxTimestamp
			}
		}
	}
	if best < 0 {
		return nil, nil
	}
	return t.batch(ctx, bestObj, bestFooter, best)
}

// batch is batch i of o, out of its cached chunk.
func (t *Tier) batch(ctx context.Context, o meta.RemoteObject, f *footer, i int) ([]byte, error) {
	c := f.chunkOf(i)
	chunk, err := t.chunk(ctx, o, f, c)
	if err != nil {
		return nil, err
	}
	at, _ := f.span(c, o.DataLen)
	e := f.entries[i]
	return chunk[int64(e.pos)-at : int64(e.pos)-at+int64(e.size)], nil
}

// footer reads (or finds cached) o's footer.
func (t *Tier) footer(ctx context.Context, o meta.RemoteObject) (*footer, error) {
	v, err := t.cache.get(cacheKey{o.Key, -1}, func() (any, int64, error) {
		b := make([]byte, o.Size-o.DataLen)
		if err := t.readRange(ctx, o.Key, o.DataLen, b); err != nil {
			return nil, 0, err
		}
		entries, dataLen, err := parseFooter(b)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: object %s: %w", ErrRemote, o.Key, err)
		}
		if dataLen != o.DataLen || entries[0].base != o.Base || entries[len(entries)-1].end() != o.End {
			return nil, 0, fmt.Errorf("%w: object %s: footer does not match its record", ErrRemote, o.Key)
		}
		return newFooter(entries, t.cfg.ChunkBytes), int64(len(b)), nil
	}, &t.stats)
	if err != nil {
		return nil, err
	}
	return v.(*footer), nil
}

// chunk reads (or finds cached) chunk c of o.
func (t *Tier) chunk(ctx context.Context, o meta.RemoteObject, f *footer, c int) ([]byte, error) {
	v, err := t.cache.get(cacheKey{o.Key, c}, func() (any, int64, error) {
		off, end := f.span(c, o.DataLen)
		b := make([]byte, end-off)
		if err := t.readRange(ctx, o.Key, off, b); err != nil {
			return nil, 0, err
		}
		return b, int64(len(b)), nil
	}, &t.stats)
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// readAhead reads chunk c of o into the cache in the background, unless it is there or
// being read, or two reads ahead are under way already.
func (t *Tier) readAhead(o meta.RemoteObject, f *footer, c int) {
	if t.cache.has(cacheKey{o.Key, c}) {
		return
	}
	select {
	case t.cache.ahead <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-t.cache.ahead }()
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		defer cancel()
		_, _ = t.chunk(ctx, o, f, c)
	}()
}

func (t *Tier) readRange(ctx context.Context, key string, off int64, dst []byte) error {
	t.stats.readCalls.Add(1)
	if err := t.bucket.ReadAt(ctx, key, off, dst); err != nil {
		t.stats.readErrors.Add(1)
		return fmt.Errorf("%w: %s at %d: %w", ErrRemote, key, off, err)
	}
	return nil
}

// readCache holds footers and chunks of remote objects, least recently used first out, within
// a byte bound. A value being read is read once: callers that want it meanwhile wait for it.
type readCache struct {
	mu       sync.Mutex
	max      int64
	used     int64
	lru      *list.List // of *cached, most recent at the front
	entries  map[cacheKey]*list.Element
	inflight map[cacheKey]*loading
	ahead    chan struct{} // reads ahead under way
}

type cacheKey struct {
	key   string
	chunk int // -1: the footer
}

type cached struct {
	k    cacheKey
	v    any
	size int64
}

type loading struct {
	done chan struct{}
	v    any
	err  error
}

func newReadCache(max int64) *readCache {
	return &readCache{max: max, lru: list.New(), entries: map[cacheKey]*list.Element{},
		inflight: map[cacheKey]*loading{}, ahead: make(chan struct{}, 2)}
}

func (c *readCache) has(k cacheKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[k]
	_, busy := c.inflight[k]
	return ok || busy
}

// get is k's value, loaded by load when it is not cached.
func (c *readCache) get(k cacheKey, load func() (any, int64, error), st *counters) (any, error) {
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		c.lru.MoveToFront(e)
		v := e.Value.(*cached).v
		c.mu.Unlock()
		st.cacheHits.Add(1)
		return v, nil
	}
	if l, ok := c.inflight[k]; ok {
		c.mu.Unlock()
		<-l.done
		st.cacheHits.Add(1)
		return l.v, l.err
	}
	l := &loading{done: make(chan struct{})}
	c.inflight[k] = l
	c.mu.Unlock()
	st.cacheMisses.Add(1)
	v, size, err := load()
	l.v, l.err = v, err
	c.mu.Lock()
	delete(c.inflight, k)
	if err == nil && size <= c.max {
		c.entries[k] = c.lru.PushFront(&cached{k: k, v: v, size: size})
		c.used += size
		for c.used > c.max {
			last := c.lru.Back()
			e := last.Value.(*cached)
			c.lru.Remove(last)
			delete(c.entries, e.k)
			c.used -= e.size
		}
	}
	c.mu.Unlock()
	close(l.done)
	return v, err
}

// demote makes k the first to go when the cache needs room.
func (c *readCache) demote(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.lru.MoveToBack(e)
	}
}

// forget drops what is cached of an object (deleted by retention).
func (c *readCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; {
		next := e.Next()
		if ce := e.Value.(*cached); ce.k.key == key {
			c.lru.Remove(e)
			delete(c.entries, ce.k)
			c.used -= ce.size
		}
		e = next
	}
}

// Used is the bytes the cache holds.
func (c *readCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
