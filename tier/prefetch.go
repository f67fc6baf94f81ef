package tier

import (
	"context"
	"sync"
	"time"

	"inlet/meta"
	"inlet/objstore"
)

// RecordCache holds the records of a bucket's tiered objects (what readRecord makes of an
// object's trailer and footer), read ahead by a node that may restore from the bucket later:
// a --standby node refreshes one while it waits, and its takeover's restore (RestoreWith)
// reads only the objects uploaded since the last refresh, rather than two range reads of
// every object in the bucket.
//
// Objects are immutable under their keys (an object's key names its topic, partition,
// offsets and epoch, and is written once: a conditional PUT), so a record read earlier is
// the record a read now would give; the size is checked against the listing all the same,
// and a record is used only where both key and size match. UploadedMs is set when a record
// is used, as readRecord sets it.
//
// Refresh and the reads of a restore may run at the same time (one mutex over the map);
// refreshes run one at a time.
type RecordCache struct {
	refreshing sync.Mutex // one Refresh at a time
	mu         sync.Mutex // guards recs and the counters
	recs       map[string]cachedRecord
	read, hits int64
}

type cachedRecord struct {
	size int64
	o    meta.RemoteObject
}

// maxCachedRecords bounds a RecordCache: a record is about 100 bytes, about 250 with its key
// (about 100 bytes, shared by the map and the record) and its map entry, so 1<<18 records
// (262,144 objects) hold about 64 MiB at most. Past it, a refresh
// reads no more (the objects it leaves are read at the restore, as without a cache); the
// objects deleted from the bucket make room again at the next refresh.
const maxCachedRecords = 1 << 18

// NewRecordCache makes an empty cache.
func NewRecordCache() *RecordCache {
	return &RecordCache{recs: map[string]cachedRecord{}}
}

// RecordCacheStats is what a RecordCache holds and has done.
type RecordCacheStats struct {
	Records int   // records held
	Read    int64 // records read by its refreshes, all told
	Hits    int64 // records a restore took from it rather than from the bucket
}

// Stats is c's stats (zero for a nil cache).
func (c *RecordCache) Stats() RecordCacheStats {
	if c == nil {
		return RecordCacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return RecordCacheStats{Records: len(c.recs), Read: c.read, Hits: c.hits}
}

// Refresh lists bucket as Restore does, drops the records of keys no longer listed (or
// listed with another size), and reads the record of every tiered object it does not hold
// yet, restoreReaders at a time. It returns how many it read; an object that does not read is
// left out (and tried again at the next refresh), the first such error returned after the
// others are read. A listing that fails changes nothing.
func (c *RecordCache) Refresh(ctx context.Context, bucket objstore.Bucket) (read int, err error) {
	c.refreshing.Lock()
	defer c.refreshing.Unlock()
	listed := map[string]keyedObject{}
	err = bucket.List(ctx, "", func(key string, size int64) error {
		if _, _, _, ok := parseDescriptionKey(key); ok {
			return nil
		}
		if k, ok := parseObjectKey(key); ok {
			listed[key] = keyedObject{key: key, size: size, parsed: k}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var missing []keyedObject
	c.mu.Lock()
	for key, r := range c.recs {
		if ko, ok := listed[key]; !ok || ko.size != r.size {
			delete(c.recs, key)
		}
	}
	room := maxCachedRecords - len(c.recs)
	for key, ko := range listed {
		if _, ok := c.recs[key]; !ok && len(missing) < room {
			missing = append(missing, ko)
		}
	}
	c.mu.Unlock()

	var (
		wg    sync.WaitGroup
		emu   sync.Mutex
		first error
		n     int
	)
	sem := make(chan struct{}, restoreReaders)
	for _, ko := range missing {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			o, err := readRecord(ctx, bucket, ko)
			if err != nil {
				emu.Lock()
				if first == nil {
					first = err
				}
				emu.Unlock()
				return
			}
			c.mu.Lock()
			c.recs[ko.key] = cachedRecord{size: ko.size, o: o}
			c.read++
			c.mu.Unlock()
			emu.Lock()
			n++
			emu.Unlock()
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return n, first
}

// record is the cached record of ko (false if c holds none for its key and size), its
// UploadedMs now.
func (c *RecordCache) record(ko keyedObject) (meta.RemoteObject, bool) {
	if c == nil {
		return meta.RemoteObject{}, false
	}
	c.mu.Lock()
	r, ok := c.recs[ko.key]
	if ok && r.size == ko.size {
		c.hits++
	}
	c.mu.Unlock()
	if !ok || r.size != ko.size {
		return meta.RemoteObject{}, false
	}
	o := r.o
	o.UploadedMs = time.Now().UnixMilli()
	return o, true
}
