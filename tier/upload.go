package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"inlet/batchlog"
	"inlet/meta"
	"inlet/objstore"
	"inlet/wire"
)

// Upload: per tiered partition, the batches from the end of its last recorded object (or its
// local log start, if later) up to its last stable offset are listed from the index. Once
// they reach the object size, or the first of them has waited the upload interval, an object
// of them is written (objectBody streams it from the log, one chunk of batches at a time),
// then recorded. One pass uploads what is due of every partition, several objects of one
// partition if it is far behind, and uploadWorkers partitions at once while the tier is behind.
//
// Only batches below the last stable offset go: an object never holds a transaction that has
// not ended, so the aborted-transaction index (kept by the log from the log start, across
// both tiers) is complete for every remote range.

// readChunk is how much of the log objectBody reads at once.
const readChunk = 1 << 20

// uploadWorkers is how many partitions upload at once while the tier is behind: from the
// moment a pass finds a partition with two objects' worth of batches due, that pass and the
// next upload uploadWorkers partitions at a time, and one at a time again after a pass that
// found none. One at a time, a node with diskless topics flat out on 2 cores had 3.6 of the
// 5.7 GB it acknowledged in 40 s in the tier 15 s after the load stopped, and fell further
// behind for as long as the load lasted (local retention and the diskless checkpoints wait for
// the tier); this way it was within an object a partition, at 0.88 of the produce rate
// (BENCHMARKS.md, "Diskless topics"). Four at a time in every pass, tried and not kept, made
// the produce ack tail at half that load worse: one keeps up there. Kafka's copier pool
// (remote.log.manager.copier.thread.pool.size) has 10 threads; 4 keeps the read chunks
// (readChunk each) and the connections to the bucket few.
const uploadWorkers = 4

// gateWait bounds how long an upload waits for the diskless commit PUTs in flight before each
// chunk (Config.Gate), while the tier is not behind. On 2 cores beside versitygw, a tier
// uploading beside the commit PUTs at about half the diskless flat-out rate took the bucket
// server's CPU from them in bursts (every partition's object falls due at once): the ack p99
// at 725,000 records/s was 337 ms without the gate and 238 ms with it, medians of 9 rounds
// (BENCHMARKS.md, "Diskless topics"). Commit PUTs start at most every 100 ms by default, so a
// tier that keeps up finds gaps between them; one that falls behind stops giving way
// (uploadAll).
const gateWait = 200 * time.Millisecond

// uploadAll uploads what is due of every tiered partition (each partition's objects in order,
// by one worker; uploadWorkers partitions at a time once the tier is behind: see there), and
// writes the topics' descriptions that changed.
func (t *Tier) uploadAll(ctx context.Context, now time.Time) error {
	var errs []error
	described := map[string]bool{}
	parts := t.tiered()
	for _, tp := range parts {
		if !described[tp.topic.Name] && !tp.topic.Settings.Diskless { // package diskless describes those
			described[tp.topic.Name] = true
			if err := t.describe(ctx, tp.topic); err != nil {
				errs = append(errs, err) // its batches are uploaded whatever: a restore needs both
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan tieredPartition)
	behindNow := make(chan struct{}, 1)
	worker := func() {
		defer wg.Done()
		for tp := range next {
			if err := t.uploadPartition(ctx, tp, t.part(tp.p.ID), now, behindNow); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("tier: upload %s/%d: %w", tp.topic.Name, tp.p.Index, err))
				mu.Unlock()
			}
		}
	}
	// One worker, or uploadWorkers from the start if the last pass found the tier behind, or
	// from the moment this one does (behindNow).
	workers := 0
	grow := func(n int) {
		for ; workers < min(n, len(parts)); workers++ {
			wg.Add(1)
			go worker()
		}
	}
	if t.behind {
		grow(uploadWorkers)
	} else {
		grow(1)
	}
	t.giveWay.Store(!t.behind)
	behind := false
	for _, tp := range parts {
		if ctx.Err() != nil {
			break
		}
	send:
		for {
			select {
			case next <- tp:
				break send
			case <-behindNow:
				behind = true
				grow(uploadWorkers)
			}
		}
	}
	close(next)
	wg.Wait()
	select {
	case <-behindNow: // told after the last partition was handed out
		behind = true
	default:
	}
	t.behind = behind
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var lagBytes int64
	var oldest time.Time
	for _, tp := range parts {
		ps := t.part(tp.p.ID)
		lagBytes += ps.lagBytes
		if !ps.pendingSince.IsZero() && (oldest.IsZero() || ps.pendingSince.Before(oldest)) {
			oldest = ps.pendingSince
		}
	}
	t.stats.lagBytes.Store(lagBytes)
	if oldest.IsZero() {
		t.stats.lagMs.Store(0)
	} else {
		t.stats.lagMs.Store(now.Sub(oldest).Milliseconds())
	}
	return errors.Join(errs...)
}

// setLag sets ps's lag (the batch bytes due and not uploaded, as last listed) and moves the
// metric's sum with it, so that it follows each listing and upload rather than waiting for the
// pass to end (one partition at a time, a pass of a tier far behind lasts as long as its
// uploads); uploadAll sums it afresh at the end of a pass.
func (t *Tier) setLag(ps *partState, lag int64) {
	t.stats.lagBytes.Add(lag - ps.lagBytes)
	ps.lagBytes = lag
}

// batchRef is a batch listed from the index: its base offset and stored size.
type batchRef struct {
	base int64
	size int
}

// uploadPartition uploads the objects of tp that are due, and tells behindNow (without
// waiting) when two objects' worth of its batches are due.
func (t *Tier) uploadPartition(ctx context.Context, tp tieredPartition, ps *partState, now time.Time, behindNow chan<- struct{}) error {
	p, st := tp.p, tp.topic.Settings
	target := t.cfg.ObjectBytes
	if st.SegmentBytes > 0 {
		target = min(target, st.SegmentBytes)
	}
	wait := t.cfg.UploadInterval
	if st.SegmentMs >= 0 {
		wait = min(wait, time.Duration(st.SegmentMs)*time.Millisecond)
	}
	for {
		from := max(t.UploadedEnd(p), p.LocalLogStartOffset())
		limit := min(p.LastStableOffset(), p.HighWatermark())
		if from >= limit {
			ps.pendingSince = time.Time{}
			t.setLag(ps, 0)
			return nil
		}
		if from > t.UploadedEnd(p) {
			// From the local log start, which may lie inside a batch (DeleteRecords): the
			// object starts with the batch that holds it, whole.
			b, err := t.log.ReadBatches(p, from, limit, 1, true, nil)
			if err != nil {
				return err
			}
			if h, err := wire.ParseBatchHeader(b); err == nil {
				from = h.BaseOffset
			}
		}
		var batches []batchRef
		var data, lag int64
		err := t.log.IndexedBatches(p, from, limit, func(base int64, size int) bool {
			lag += int64(size)
			if data < target {
				batches = append(batches, batchRef{base, size})
				data += int64(size)
			}
			return true
		})
		if err != nil {
			return err
		}
		t.setLag(ps, lag)
		if lag >= 2*target {
			// An object past this one is due or nearly: the tier is behind the log, and no
			// longer gives way to the commit PUTs.
			t.giveWay.Store(false)
			select {
			case behindNow <- struct{}{}:
			default:
			}
		}
		if len(batches) == 0 {
			ps.pendingSince = time.Time{}
			return nil
		}
		if ps.pendingSince.IsZero() {
			ps.pendingSince = now
		}
		if data < target && now.Sub(ps.pendingSince) < wait {
			return nil // not due yet
		}
		o, err := t.upload(ctx, tp, batches, limit)
		if err != nil {
			return err
		}
		ps.mu.Lock()
		ps.objects = append(ps.objects, o)
		ps.end = o.End
		ps.mu.Unlock()
		t.setLag(ps, ps.lagBytes-o.DataLen)
		ps.pendingSince = time.Time{}
		if ps.lagBytes > 0 {
			ps.pendingSince = now
		}
		t.stats.uploadedBytes.Add(o.Size)
		t.stats.uploadedObjects.Add(1)
	}
}

// pacer spreads the uploads' reads of the log, and so their writes to the bucket, evenly over
// time at Config.UploadBytesPerSec: before each chunk an object reads (readChunk), it waits
// until the chunks before it are due at that rate, so that the disk and the network never see
// more than the rate (paced per object, each upload went at full speed, then waited). Time
// the uploads left idle is not made up in a burst.
type pacer struct {
	rate float64 // bytes a second; 0: unpaced
	mu   sync.Mutex
	next time.Time // when the chunks paced so far are due
}

// wait waits until a chunk of n bytes may be read.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p.rate <= 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	d := p.next.Sub(now)
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// upload writes one object of batches (listed from the index, all below limit) and records it.
func (t *Tier) upload(ctx context.Context, tp tieredPartition, batches []batchRef, limit int64) (meta.RemoteObject, error) {
	p := tp.p
	body := newObjectBody(batches, func(from int64, dst []byte) ([]byte, error) {
		if t.giveWay.Load() {
			t.cfg.Gate.Wait(ctx, gateWait)
		}
		if err := t.pace.wait(ctx, readChunk); err != nil {
			return nil, err
		}
		return t.log.ReadBatches(p, from, limit, readChunk, true, dst)
	})
	// The object's end is the offset after its last batch, known once the body has read it:
	// the key needs it first, so the last batch's header is read on its own.
	last := batches[len(batches)-1]
	lb, err := t.log.ReadBatches(p, last.base, limit, 1, true, nil)
	if err != nil {
		return meta.RemoteObject{}, err
	}
	lh, err := wire.ParseBatchHeader(lb)
	if err != nil {
		return meta.RemoteObject{}, err
	}
	end := lh.BaseOffset + int64(lh.LastOffsetDelta) + 1
	base := batches[0].base
	key := objectKey(tp.topic.Name, tp.topic.ID, p.Index, base, end, t.epoch())
	cctx, cancel, err := t.writeCtx(ctx)
	if err != nil {
		return meta.RemoteObject{}, err
	}
	err = t.bucket.Put(cctx, key, body, body.size)
	cancel()
	if errors.Is(err, objstore.ErrExists) {
		// No record names it (this partition's records end at base): an orphan of an upload
		// a crash cut short after its PUT. It goes, and the next pass writes it again.
		cctx, cancel, derr := t.writeCtx(ctx)
		if derr == nil {
			derr = t.bucket.Delete(cctx, key)
			cancel()
		}
		if derr == nil {
			t.stats.orphansDeleted.Add(1)
		}
		return meta.RemoteObject{}, fmt.Errorf("object %s existed without a record; deleted, to be written again: %w", key, errors.Join(err, derr))
	}
	if err != nil {
		return meta.RemoteObject{}, err
	}
	if body.err != nil {
		return meta.RemoteObject{}, body.err
	}
	if !body.complete() {
		return meta.RemoteObject{}, fmt.Errorf("object %s: the body was not read whole", key)
	}
	o := meta.RemoteObject{Partition: p.ID, Base: base, End: end, DataLen: body.dataLen, Size: body.size,
		MaxTimestamp: body.maxTimestamp, Batches: int32(len(batches)), UploadedMs: time.Now().UnixMilli(), Key: key}
	if body.lastEnd != end {
		return meta.RemoteObject{}, fmt.Errorf("object %s: last batch ends at %d, not %d", key, body.lastEnd, end)
	}
	if !t.writable() {
		// Written within the lease, not recorded: an orphan, which the clean of whoever
		// holds the prefix next deletes.
		return meta.RemoteObject{}, errNotWriter
	}
	if err := t.meta.SaveRemoteObject(o); err != nil {
		return meta.RemoteObject{}, err
	}
	return o, nil
}

// objectBody is an object being uploaded, as an io.ReadSeeker: its batches read from the log a
// chunk at a time (memory: one chunk, whatever the object's size), then the footer, built
// from the batches' headers as they are read in order. A reader that seeks back reads the
// log again; the footer must have been built by one read of the data from the start before it
// is read (the SDK reads the body in order: once to sign it, once to send it).
type objectBody struct {
	batches []batchRef
	pos     []int64 // pos[i]: batch i's position in the object
	read    func(from int64, dst []byte) ([]byte, error)
	dataLen int64
	size    int64

	at           int64  // the read position
	buf          []byte // batches read from the log: buf[0] is at bufAt
	bufAt        int64
	footer       []byte // entries, then the trailer once every entry is in
	built        int    // entries in footer
	maxTimestamp int64
	lastEnd      int64
	err          error
}

func newObjectBody(batches []batchRef, read func(from int64, dst []byte) ([]byte, error)) *objectBody {
	b := &objectBody{batches: batches, read: read, pos: make([]int64, len(batches)), maxTimestamp: -1}
	for i, r := range batches {
		b.pos[i] = b.dataLen
		b.dataLen += int64(r.size)
	}
	b.size = b.dataLen + int64(len(batches))*entryLen + trailerLen
	b.footer = make([]byte, 0, len(batches)*entryLen+trailerLen)
	return b
}

func (b *objectBody) complete() bool { return b.built == len(b.batches) }

func (b *objectBody) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += b.at
	case io.SeekEnd:
		off += b.size
	default:
		return 0, errors.New("tier: bad whence")
	}
	if off < 0 {
		return 0, errors.New("tier: seek before the start")
	}
	b.at = off
	return off, nil
}

func (b *objectBody) Read(dst []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.at >= b.size {
		return 0, io.EOF
	}
	if b.at >= b.dataLen {
		if !b.complete() {
			b.err = errors.New("tier: object footer read before its batches")
			return 0, b.err
		}
		n := copy(dst, b.footer[b.at-b.dataLen:])
		b.at += int64(n)
		return n, nil
	}
	if b.at < b.bufAt || b.at >= b.bufAt+int64(len(b.buf)) {
		if err := b.fill(); err != nil {
			b.err = err
			return 0, err
		}
	}
	n := copy(dst, b.buf[b.at-b.bufAt:])
	b.at += int64(n)
	return n, nil
}

// WriteTo writes the body from the read position to its end, a chunk of batches at a time
// straight from where fill read it (objstore.Streamed: over plain http the connection is
// handed here, with no copy through net/http's 32 KiB buffer).
func (b *objectBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for b.at < b.size {
		if b.err != nil {
			return n, b.err
		}
		var chunk []byte
		switch {
		case b.at >= b.dataLen:
			if !b.complete() {
				b.err = errors.New("tier: object footer read before its batches")
				return n, b.err
			}
			chunk = b.footer[b.at-b.dataLen:]
		default:
			if b.at < b.bufAt || b.at >= b.bufAt+int64(len(b.buf)) {
				if err := b.fill(); err != nil {
					b.err = err
					return n, err
				}
			}
			chunk = b.buf[b.at-b.bufAt:]
			if rest := b.dataLen - b.at; int64(len(chunk)) > rest {
				chunk = chunk[:rest]
			}
		}
		k, err := w.Write(chunk)
		n += int64(k)
		b.at += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// StreamedPut marks objectBody as an objstore.Streamed.
func (b *objectBody) StreamedPut() {}

// fill reads the chunk of batches that holds the read position, checks it against the
// listing, and adds the footer entries of batches read for the first time in order.
func (b *objectBody) fill() error {
	i := sort.Search(len(b.pos), func(i int) bool { return b.pos[i] > b.at }) - 1
	buf, err := b.read(b.batches[i].base, b.buf[:0])
	if err != nil {
		return err
	}
	b.buf, b.bufAt = buf, b.pos[i]
	// Keep only the listed batches: the read may go on past the object's last one.
	n := 0
	for j := i; j < len(b.batches) && n < len(buf); j++ {
		rest := buf[n:]
		if len(rest) < 61 {
			break
		}
		size := int(binary.BigEndian.Uint32(rest[8:])) + 12
		if size != b.batches[j].size || int64(binary.BigEndian.Uint64(rest)) != b.batches[j].base {
			return fmt.Errorf("tier: batch at %d changed while uploaded (base %d, %d bytes; listed %d, %d bytes)",
				b.pos[j], int64(binary.BigEndian.Uint64(rest)), size, b.batches[j].base, b.batches[j].size)
		}
		if j == b.built {
			h, err := wire.ParseBatchHeader(rest[:size])
			if err != nil {
				return err
			}
			e := entry{base: h.BaseOffset, lastDelta: h.LastOffsetDelta, pos: uint32(b.pos[j]), size: uint32(size),
				maxTimestamp: h.MaxTimestamp, attrs: uint16(h.Attributes)}
			b.footer = appendEntry(b.footer, e)
			b.maxTimestamp = max(b.maxTimestamp, h.MaxTimestamp)
			b.lastEnd = e.end()
			b.built++
			if b.complete() {
				b.footer = appendTrailer(b.footer, 0, b.dataLen)
			}
		}
		n += size
	}
	if n == 0 {
		return fmt.Errorf("tier: no batch read at offset %d", b.batches[i].base)
	}
	b.buf = buf[:n]
	return nil
}

// topicDescription is a tiered topic's description in the bucket: what a node
// rebuilt from the bucket recreates it with.
type topicDescription struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // hex
	Partitions int               `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// describe writes a tiered topic's description when it is new to this run or changed: the
// next one first, then the last this run wrote is deleted (older ones, of earlier runs, go at
// the clean).
func (t *Tier) describe(ctx context.Context, tp *batchlog.Topic) error {
	d := topicDescription{Name: tp.Name, ID: fmt.Sprintf("%x", tp.ID), Partitions: len(tp.Partitions), Configs: tp.Configs}
	js, err := json.Marshal(d)
	if err != nil {
		return err
	}
	t.mu.Lock()
	last := t.described[tp.Name]
	t.mu.Unlock()
	if last.json == string(js) {
		return nil
	}
	key := descriptionKeyEpoch(tp.Name, tp.ID, time.Now().UnixNano(), t.epoch())
	cctx, cancel, err := t.writeCtx(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := t.bucket.Put(cctx, key, bytes.NewReader(js), int64(len(js))); err != nil {
		return err
	}
	t.mu.Lock()
	t.described[tp.Name] = description{key: key, json: string(js)}
	t.mu.Unlock()
	if last.key != "" {
		return t.bucket.Delete(cctx, last.key)
	}
	return nil
}

// description is the description of a topic this run wrote last.
type description struct{ key, json string }
