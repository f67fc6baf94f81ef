package objstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Memory is an in-process Bucket for unit tests, with the semantics of S3 as OpenS3 sees
// them (Put-if-absent, PutIf on an ETag that is the quoted MD5 of the bytes as S3's is, ranges
// wholly inside the object, listing in byte order of keys) and injected faults. The zero value is not usable; call NewMemory. Safe for concurrent use.
//
// Faults are checked in this order on every call, after the call is counted: the per-call
// delay (cut short by the context), SetDown's error, then FailNext's, then the operation
// itself, then LoseNextReply's (the operation took effect but the caller sees an error, as
// when a reply is lost on the way back).
type Memory struct {
	mu      sync.Mutex
	objects map[string][]byte
	down    error
	delay   time.Duration
	fail    [numOps]fault
	lose    [numOps]fault
	calls   [numOps]int64
}

type fault struct {
	n   int
	err error
}

// NewMemory returns an empty Memory bucket.
func NewMemory() *Memory {
	return &Memory{objects: make(map[string][]byte)}
}

// SetDown makes every call fail with err until SetDown(nil).
func (m *Memory) SetDown(err error) {
	m.mu.Lock()
	m.down = err
	m.mu.Unlock()
}

// FailNext makes the next n calls of op fail with err, without effect.
func (m *Memory) FailNext(op Op, n int, err error) {
	m.mu.Lock()
	m.fail[op] = fault{n, err}
	m.mu.Unlock()
}

// LoseNextReply makes the next n calls of op take effect and then return err.
func (m *Memory) LoseNextReply(op Op, n int, err error) {
	m.mu.Lock()
	m.lose[op] = fault{n, err}
	m.mu.Unlock()
}

// SetDelay makes every call wait d before it does anything (0: no wait).
func (m *Memory) SetDelay(d time.Duration) {
	m.mu.Lock()
	m.delay = d
	m.mu.Unlock()
}

// Calls returns how many calls of op were made, failed ones included.
func (m *Memory) Calls(op Op) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[op]
}

// Keys returns the keys of every object, in ascending order.
func (m *Memory) Keys() []string {
	m.mu.Lock()
	keys := make([]string, 0, len(m.objects))
	for k := range m.objects {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	sort.Strings(keys)
	return keys
}

// Object returns a copy of key's bytes, and whether it exists.
func (m *Memory) Object(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	return bytes.Clone(b), ok
}

// enter counts a call and applies the faults that come before it.
func (m *Memory) enter(ctx context.Context, op Op) error {
	m.mu.Lock()
	m.calls[op]++
	d := m.delay
	m.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down != nil {
		return m.down
	}
	return take(&m.fail[op])
}

// leave applies LoseNextReply's fault to a call that succeeded.
func (m *Memory) leave(op Op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return take(&m.lose[op])
}

func take(f *fault) error {
	if f.n <= 0 {
		return nil
	}
	f.n--
	return f.err
}

// Put reads body once, into the bucket's own copy.
func (m *Memory) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	if err := m.enter(ctx, OpPut); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	if key == "" {
		return fmt.Errorf("objstore: put: empty key")
	}
	if size < 0 {
		return fmt.Errorf("objstore: put %s: negative size %d", key, size)
	}
	m.mu.Lock()
	_, exists := m.objects[key]
	m.mu.Unlock()
	if exists {
		return fmt.Errorf("objstore: put %s: %w", key, ErrExists)
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("objstore: put %s: rewinding the body: %w", key, err)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(body, data); err != nil {
		return fmt.Errorf("objstore: put %s: reading %d bytes of body: %w", key, size, err)
	}
	if c, ok := body.(Checksummed); ok {
		if sum, ok := c.CRC32C(); ok && crc32.Checksum(data, castagnoli) != sum {
			return fmt.Errorf("objstore: put %s: %w", key, ErrBadDigest)
		}
	}
	m.mu.Lock()
	// Checked again: two Puts of one key may have read their bodies at once; as on S3,
	// the first to complete wins.
	if _, exists := m.objects[key]; exists {
		m.mu.Unlock()
		return fmt.Errorf("objstore: put %s: %w", key, ErrExists)
	}
	m.objects[key] = data
	m.mu.Unlock()
	if err := m.leave(OpPut); err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	return nil
}

func (m *Memory) ReadAt(ctx context.Context, key string, off int64, dst []byte) error {
	if err := m.enter(ctx, OpReadAt); err != nil {
		return fmt.Errorf("objstore: read %s: %w", key, err)
	}
	m.mu.Lock()
	obj, ok := m.objects[key]
	if ok && off >= 0 && off <= int64(len(obj)) && int64(len(dst)) <= int64(len(obj))-off {
		copy(dst, obj[off:])
	}
	m.mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("objstore: read %s: %w", key, ErrNotFound)
	case off < 0 || off > int64(len(obj)) || int64(len(dst)) > int64(len(obj))-off:
		return fmt.Errorf("objstore: read %s [%d, +%d): object has %d bytes: %w", key, off, len(dst), len(obj), ErrOutOfRange)
	}
	if err := m.leave(OpReadAt); err != nil {
		return fmt.Errorf("objstore: read %s: %w", key, err)
	}
	return nil
}

// List takes a snapshot of the matching keys and calls fn without holding the lock, so fn may
// call the bucket.
func (m *Memory) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	if err := m.enter(ctx, OpList); err != nil {
		return fmt.Errorf("objstore: list %s: %w", prefix, err)
	}
	type entry struct {
		key  string
		size int64
	}
	m.mu.Lock()
	var entries []entry
	for k, v := range m.objects {
		if strings.HasPrefix(k, prefix) {
			entries = append(entries, entry{k, int64(len(v))})
		}
	}
	m.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	if err := m.leave(OpList); err != nil {
		return fmt.Errorf("objstore: list %s: %w", prefix, err)
	}
	for _, e := range entries {
		if err := fn(e.key, e.size); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := m.enter(ctx, OpDelete); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	m.mu.Lock()
	delete(m.objects, key)
	m.mu.Unlock()
	if err := m.leave(OpDelete); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	return nil
}

// PutIf reads body once; the condition is checked under the lock, at the moment of the write,
// as S3 checks it when the upload completes.
func (m *Memory) PutIf(ctx context.Context, key string, body io.ReadSeeker, size int64, ifMatch string) (string, error) {
	if err := m.enter(ctx, OpPutIf); err != nil {
		return "", fmt.Errorf("objstore: putif %s: %w", key, err)
	}
	if key == "" {
		return "", fmt.Errorf("objstore: putif: empty key")
	}
	if size < 0 {
		return "", fmt.Errorf("objstore: putif %s: negative size %d", key, size)
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("objstore: putif %s: rewinding the body: %w", key, err)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(body, data); err != nil {
		return "", fmt.Errorf("objstore: putif %s: reading %d bytes of body: %w", key, size, err)
	}
	m.mu.Lock()
	old, exists := m.objects[key]
	switch {
	case ifMatch == "" && exists:
		m.mu.Unlock()
		return "", fmt.Errorf("objstore: putif %s: %w", key, ErrExists)
	case ifMatch != "" && !exists:
		m.mu.Unlock()
		return "", fmt.Errorf("objstore: putif %s: %w", key, ErrNotFound)
	case ifMatch != "" && etagOf(old) != ifMatch:
		m.mu.Unlock()
		return "", fmt.Errorf("objstore: putif %s: %w", key, ErrPreconditionFailed)
	}
	m.objects[key] = data
	m.mu.Unlock()
	if err := m.leave(OpPutIf); err != nil {
		return "", fmt.Errorf("objstore: putif %s: %w", key, err)
	}
	return etagOf(data), nil
}

func (m *Memory) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := m.enter(ctx, OpGet); err != nil {
		return nil, "", fmt.Errorf("objstore: get %s: %w", key, err)
	}
	m.mu.Lock()
	obj, ok := m.objects[key]
	m.mu.Unlock()
	if !ok {
		return nil, "", fmt.Errorf("objstore: get %s: %w", key, ErrNotFound)
	}
	if len(obj) > MaxGetBytes {
		return nil, "", fmt.Errorf("objstore: get %s: object has %d bytes, more than %d", key, len(obj), MaxGetBytes)
	}
	if err := m.leave(OpGet); err != nil {
		return nil, "", fmt.Errorf("objstore: get %s: %w", key, err)
	}
	// Stored objects are never modified in place (a write replaces the slice), so the
	// copy is of one version.
	return bytes.Clone(obj), etagOf(obj), nil
}

// etagOf is S3's ETag of a single-PUT object: the quoted hex MD5 of its bytes.
func etagOf(b []byte) string {
	sum := md5.Sum(b)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

var _ Bucket = (*Memory)(nil)
