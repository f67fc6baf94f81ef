package tier

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/objstore"
)

// Restore rebuilds the tiered topics of an empty log from the bucket (--restore-from-remote):
// for each topic description it finds (the newest of each), the topic is created with its id, partition count and
// configs, and each partition's uploaded objects (their footers read and checked) are
// recorded; the partition then starts at its first object's base offset and continues after
// its last object's end, its local log empty, so that every uploaded batch is read from the
// remote tier at once and new writes follow the last uploaded offset. A diskless topic's
// description (DescribeTopic) recreates it the same way, with its uploaded objects (the tier
// uploads diskless partitions too), for package diskless to replay the commit objects after
// them into (diskless.Committer.Recover).
//
// What is not in the bucket is not brought back: batches not uploaded yet (the untiered tail:
// up to --remote-object-bytes or --remote-upload-interval-ms of each partition, and anything
// above the last stable offset), topics with neither remote.storage.enable nor diskless.enable,
// tiered topics' idempotent producer windows, transactions, consumer group offsets, and the run-time users, ACLs and quotas. An
// object that does not read, or that overlaps one taken before it, is left for the clean, and
// so is one written under an older epoch than an object before it (a writer that kept
// writing after another took the prefix: package lease); a gap between objects (retention passed batches never uploaded) is read past, as a
// consumer reads past the offsets compaction removed.
//
// Run it before Open and before the node serves.
func Restore(ctx context.Context, l *batchlog.Log, m *meta.Store, bucket objstore.Bucket, logger *slog.Logger) (topics, objects int, err error) {
	return RestoreWith(ctx, l, m, bucket, nil, logger)
}

// RestoreWith is Restore taking the records cache holds (nil: none) from it rather than from
// the bucket: only the objects it does not hold (by key and size) are read.
func RestoreWith(ctx context.Context, l *batchlog.Log, m *meta.Store, bucket objstore.Bucket, cache *RecordCache, logger *slog.Logger) (topics, objects int, err error) {
	if len(l.Topics()) > 0 {
		return 0, 0, errors.New("tier: restore needs an empty data directory; this one has topics")
	}
	descKeys := map[string]keyedObject{} // the newest description, by "<topic>/<id>"
	parts := map[string][]keyedObject{}  // by "<topic>/<id>/<partition>"
	err = bucket.List(ctx, "", func(key string, size int64) error {
		if dir, _, _, ok := parseDescriptionKey(key); ok {
			if prev, ok := descKeys[dir]; !ok || newerDescription(key, prev.key) {
				descKeys[dir] = keyedObject{key: key, size: size}
			}
			return nil
		}
		if k, ok := parseObjectKey(key); ok {
			pk := fmt.Sprintf("%s/%s/%d", k.topic, k.id, k.partition)
			parts[pk] = append(parts[pk], keyedObject{key: key, size: size, parsed: k})
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	descs := map[string]topicDescription{}
	for dir, ko := range descKeys {
		d, err := readDescription(ctx, bucket, ko)
		if err != nil {
			logger.Warn("tier: restore skips a topic description that does not read", "key", ko.key, "err", err)
			continue
		}
		descs[dir] = d
	}
	names := make([]string, 0, len(descs))
	for k := range descs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, tk := range names {
		d := descs[tk]
		n, err := restoreTopic(ctx, l, m, bucket, cache, d, tk, parts, logger)
		if err != nil {
			return topics, objects, fmt.Errorf("tier: restore topic %q: %w", d.Name, err)
		}
		topics++
		objects += n
	}
	return topics, objects, nil
}

// DescribeTopic writes tp's description, the catalog entry Restore recreates a topic from,
// under a new key, deletes prev (the key written last for it; "" for none), and returns the
// new key. Package diskless keeps its topics' descriptions so, before CreateTopics,
// CreatePartitions or AlterConfigs is answered; Restore then recreates them empty, for their
// batches to be replayed from the commit objects. The key carries epoch, the writer's lease
// epoch, so that a description a fenced writer PUT late never outranks one of the writer that
// took the prefix (which describes every diskless topic again as it starts).
func DescribeTopic(ctx context.Context, bucket objstore.Bucket, tp *batchlog.Topic, prev string, epoch uint64) (string, error) {
	js, err := json.Marshal(topicDescription{Name: tp.Name, ID: fmt.Sprintf("%x", tp.ID), Partitions: len(tp.Partitions), Configs: tp.Configs})
	if err != nil {
		return "", err
	}
	key := descriptionKeyEpoch(tp.Name, tp.ID, time.Now().UnixNano(), epoch)
	if err := bucket.Put(ctx, key, bytes.NewReader(js), int64(len(js))); err != nil {
		return "", err
	}
	if prev != "" && prev != key {
		_ = bucket.Delete(ctx, prev) // an older one left is harmless: the newest is in force
	}
	return key, nil
}

type keyedObject struct {
	key    string
	size   int64
	parsed parsedKey
}

func restoreTopic(ctx context.Context, l *batchlog.Log, m *meta.Store, bucket objstore.Bucket, cache *RecordCache, d topicDescription, tk string,
	parts map[string][]keyedObject, logger *slog.Logger) (int, error) {
	var id [16]byte
	if b, err := hex.DecodeString(d.ID); err != nil || len(b) != 16 {
		return 0, fmt.Errorf("topic id %q", d.ID)
	} else {
		copy(id[:], b)
	}
	if d.Partitions <= 0 {
		return 0, fmt.Errorf("%d partitions", d.Partitions)
	}
	starts := make([]batchlog.RestoredStart, d.Partitions)
	records := make([][]meta.RemoteObject, d.Partitions)
	read := readRecords(ctx, bucket, cache, tk, d.Partitions, parts)
	for i := range starts {
		objs := parts[fmt.Sprintf("%s/%d", tk, i)]
		// By base offset, then the newest epoch, then the longest first where two begin
		// together (an orphan of a cut upload and the object written again hold the same
		// batches where they meet).
		sort.Slice(objs, func(a, b int) bool {
			pa, pb := objs[a].parsed, objs[b].parsed
			if pa.base != pb.base {
				return pa.base < pb.base
			}
			if pa.epoch != pb.epoch {
				return pa.epoch > pb.epoch
			}
			return pa.end > pb.end
		})
		end, epoch := int64(-1), uint64(0)
		for _, ko := range objs {
			if ko.parsed.base < end {
				continue // overlaps the one taken: an orphan, which the clean deletes
			}
			if ko.parsed.epoch < epoch {
				// An older writer's, after a newer writer's: written once the prefix
				// was taken from it, never part of the log.
				logger.Warn("tier: restore skips an object of an older epoch after a newer one", "key", ko.key, "epoch", ko.parsed.epoch, "after", epoch)
				continue
			}
			o, err := read[ko.key].o, read[ko.key].err
			if err != nil {
				logger.Warn("tier: restore skips an object that does not read", "key", ko.key, "err", err)
				continue
			}
			records[i] = append(records[i], o)
			end, epoch = o.End, ko.parsed.epoch
		}
		if rs := records[i]; len(rs) > 0 {
			starts[i] = batchlog.RestoredStart{LogStart: rs[0].Base, Next: rs[len(rs)-1].End}
		}
	}
	t, err := l.RestoreTopic(d.Name, id, d.Configs, starts)
	if err != nil {
		return 0, err
	}
	var all []meta.RemoteObject
	for i, rs := range records {
		for _, o := range rs {
			o.Partition = t.Partitions[i].ID
			all = append(all, o)
		}
	}
	// One synced batch: a topic's thousand records saved one fsync each took ~0.3 s.
	if err := m.SaveRemoteObjects(all); err != nil {
		return 0, err
	}
	return len(all), nil
}

type readResult struct {
	o   meta.RemoteObject
	err error
}

// restoreReaders is how many objects' footers a restore reads at once: one round trip each
// (two: trailer, then footer), so a topic's hundreds of objects take a few round trips'
// time rather than hundreds.
const restoreReaders = 32

// readRecords reads the record of every object of the topic's partitions (readRecord),
// restoreReaders at a time, by key; those cache holds are taken from it.
func readRecords(ctx context.Context, bucket objstore.Bucket, cache *RecordCache, tk string, partitions int, parts map[string][]keyedObject) map[string]readResult {
	var objs []keyedObject
	for i := range partitions {
		objs = append(objs, parts[fmt.Sprintf("%s/%d", tk, i)]...)
	}
	out := make(map[string]readResult, len(objs))
	objs = slices.DeleteFunc(objs, func(ko keyedObject) bool {
		o, ok := cache.record(ko)
		if ok {
			out[ko.key] = readResult{o: o}
		}
		return ok
	})
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, restoreReaders)
	for _, ko := range objs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			o, err := readRecord(ctx, bucket, ko)
			mu.Lock()
			out[ko.key] = readResult{o, err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// readDescription reads a topic's description.
func readDescription(ctx context.Context, bucket objstore.Bucket, ko keyedObject) (topicDescription, error) {
	var d topicDescription
	if ko.size <= 0 || ko.size > 1<<20 {
		return d, fmt.Errorf("description of %d bytes", ko.size)
	}
	b := make([]byte, ko.size)
	if err := bucket.ReadAt(ctx, ko.key, 0, b); err != nil {
		return d, err
	}
	return d, json.Unmarshal(b, &d)
}

// readRecord reads an object's trailer and footer and makes its record.
func readRecord(ctx context.Context, bucket objstore.Bucket, ko keyedObject) (meta.RemoteObject, error) {
	if ko.size < trailerLen {
		return meta.RemoteObject{}, errBadFooter
	}
	tr := make([]byte, trailerLen)
	if err := bucket.ReadAt(ctx, ko.key, ko.size-trailerLen, tr); err != nil {
		return meta.RemoteObject{}, err
	}
	n, dataLen, _, err := parseTrailer(tr)
	if err != nil || dataLen+int64(n)*entryLen+trailerLen != ko.size {
		return meta.RemoteObject{}, errBadFooter
	}
	fb := make([]byte, ko.size-dataLen)
	if err := bucket.ReadAt(ctx, ko.key, dataLen, fb); err != nil {
		return meta.RemoteObject{}, err
	}
	entries, _, err := parseFooter(fb)
	if err != nil {
		return meta.RemoteObject{}, err
	}
	if entries[0].base != ko.parsed.base || entries[len(entries)-1].end() != ko.parsed.end {
		return meta.RemoteObject{}, fmt.Errorf("footer covers %d..%d, the key %d..%d", entries[0].base, entries[len(entries)-1].end(), ko.parsed.base, ko.parsed.end)
	}
	maxTS := int64(-1)
	for _, e := range entries {
		maxTS = max(maxTS, e.maxTimestamp)
	}
	return meta.RemoteObject{Base: ko.parsed.base, End: ko.parsed.end, DataLen: dataLen, Size: ko.size, MaxTimestamp: maxTS,
		Batches: int32(len(entries)), UploadedMs: time.Now().UnixMilli(), Key: ko.key}, nil
}
