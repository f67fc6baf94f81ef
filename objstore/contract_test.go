package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"inlet/objstore"
	"inlet/objstore/objtest"
)

// harness is one implementation under the contract: open gives a bucket under a prefix of its
// own, down and up take the whole server away and bring it back.
type harness struct {
	open     func(t *testing.T, prefix string) objstore.Bucket
	down, up func(t *testing.T)
}

func memoryHarness() harness {
	m := objstore.NewMemory()
	return harness{
		// Memory has no prefix of its own; a prefixed view stands in for it.
		open: func(t *testing.T, prefix string) objstore.Bucket { return prefixed{m, prefix + "/"} },
		down: func(t *testing.T) { m.SetDown(errors.New("injected: server down")) },
		up:   func(t *testing.T) { m.SetDown(nil) },
	}
}

func versityHarness(t *testing.T) harness {
	s := objtest.StartVersity(t)
	return harness{
		open: func(t *testing.T, prefix string) objstore.Bucket { return s.Open(prefix) },
		down: func(t *testing.T) { s.Stop() },
		up:   func(t *testing.T) { s.Restart() },
	}
}

func TestContractMemory(t *testing.T)  { runContract(t, memoryHarness()) }
func TestContractVersity(t *testing.T) { runContract(t, versityHarness(t)) }

var contract = []struct {
	name string
	fn   func(t *testing.T, h harness, b objstore.Bucket)
}{
	{"ReadAtRanges", testReadAtRanges},
	{"ReadAtPastEndFails", testReadAtPastEnd},
	{"MissingKeyIsNotFound", testNotFound},
	{"SecondPutIsErrExists", testPutTwice},
	{"ConcurrentPutsOneWins", testConcurrentPuts},
	{"EmptyObject", testEmptyObject},
	{"ListOrderAndPrefix", testList},
	{"ListStopsOnCallbackError", testListStops},
	{"DeleteIsIdempotent", testDelete},
	{"ServerDownFailsFastThenRecovers", testDown},
	{"PutIfCreatesThenReplacesOnItsETag", testPutIfReplaces},
	{"PutIfOnAStaleETagIsPreconditionFailed", testPutIfStale},
	{"PutIfOfAMissingKeyIsNotFound", testPutIfMissing},
	{"ConcurrentPutIfsOnOneETagOneWins", testConcurrentPutIfs},
	{"GetMissingKeyIsNotFound", testGetMissing},
	{"ChecksummedBodyIsChecked", testChecksummed},
}

// testChecksummed: a body sent with its CRC-32C (objstore.Checksummed, as the diskless commit
// objects are) is stored; one whose sum is not its bytes' is refused with ErrBadDigest and
// leaves nothing under the key, so the same PUT with the right sum then lands.
func testChecksummed(t *testing.T, _ harness, b objstore.Bucket) {
	ctx := context.Background()
	data := pattern(300000, 7)
	sum := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	body := func(sum uint32) *objstore.Buffers {
		return objstore.NewBuffers([][]byte{data[:1000], data[1000:200000], data[200000:]}).WithCRC32C(sum)
	}
	err := b.Put(ctx, "bad", body(sum^1), int64(len(data)))
	if !errors.Is(err, objstore.ErrBadDigest) {
		t.Fatalf("a body with a wrong CRC-32C: %v, want ErrBadDigest", err)
	}
	if err := b.ReadAt(ctx, "bad", 0, make([]byte, 1)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("read after the refused PUT: %v, want ErrNotFound", err)
	}
	for _, key := range []string{"bad", "good"} {
		if err := b.Put(ctx, key, body(sum), int64(len(data))); err != nil {
			t.Fatalf("put %s with its CRC-32C: %v", key, err)
		}
		got := make([]byte, len(data))
		if err := b.ReadAt(ctx, key, 0, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %s back: %v (bytes equal: %v)", key, err, bytes.Equal(got, data))
		}
	}
}

func runContract(t *testing.T, h harness) {
	for i, c := range contract {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, h, h.open(t, fmt.Sprintf("c%02d", i)))
		})
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) ^ byte(i>>8) ^ seed
	}
	return b
}

func put(t *testing.T, b objstore.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func testReadAtRanges(t *testing.T, _ harness, b objstore.Bucket) {
	data := pattern(1000, 1)
	put(t, b, "obj", data)
	for _, r := range []struct{ off, n int }{{0, 1000}, {0, 1}, {999, 1}, {500, 100}, {1000, 0}, {0, 0}, {3, 997}} {
		dst := make([]byte, r.n)
		if err := b.ReadAt(context.Background(), "obj", int64(r.off), dst); err != nil {
			t.Fatalf("ReadAt(%d, %d): %v", r.off, r.n, err)
		}
		if !bytes.Equal(dst, data[r.off:r.off+r.n]) {
			t.Fatalf("ReadAt(%d, %d): wrong bytes", r.off, r.n)
		}
	}
}

func testReadAtPastEnd(t *testing.T, _ harness, b objstore.Bucket) {
	put(t, b, "obj", pattern(100, 2))
	for _, r := range []struct{ off, n int }{{90, 11}, {99, 2}, {100, 1}, {101, 0}, {5000, 10}, {-1, 1}} {
		err := b.ReadAt(context.Background(), "obj", int64(r.off), make([]byte, r.n))
		if !errors.Is(err, objstore.ErrOutOfRange) {
			t.Errorf("ReadAt(%d, %d) of 100 bytes: got %v, want ErrOutOfRange", r.off, r.n, err)
		}
	}
}

func testNotFound(t *testing.T, _ harness, b objstore.Bucket) {
	put(t, b, "present", []byte("x"))
	for _, n := range []int{1, 0} {
		if err := b.ReadAt(context.Background(), "absent", 0, make([]byte, n)); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("ReadAt of a missing key (len %d): got %v, want ErrNotFound", n, err)
		}
	}
}

func testPutTwice(t *testing.T, _ harness, b objstore.Bucket) {
	first := pattern(64, 3)
	put(t, b, "obj", first)
	second := pattern(80, 4)
	err := b.Put(context.Background(), "obj", bytes.NewReader(second), int64(len(second)))
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second Put: got %v, want ErrExists", err)
	}
	got := make([]byte, len(first))
	if err := b.ReadAt(context.Background(), "obj", 0, got); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("after a refused Put the first object must stay: err %v, equal %v", err, bytes.Equal(got, first))
	}
	if err := b.ReadAt(context.Background(), "obj", 0, make([]byte, 65)); !errors.Is(err, objstore.ErrOutOfRange) {
		t.Fatalf("the object grew to the second body: %v", err)
	}
}

func testConcurrentPuts(t *testing.T, _ harness, b objstore.Bucket) {
	const n = 8
	var wg sync.WaitGroup
	var won, exists atomic.Int32
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			data := pattern(4096, byte(i))
			err := b.Put(context.Background(), "race", bytes.NewReader(data), int64(len(data)))
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, objstore.ErrExists):
				exists.Add(1)
			default:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if won.Load() != 1 || exists.Load() != n-1 {
		t.Fatalf("%d concurrent Puts of one key: %d succeeded, %d got ErrExists; want 1 and %d", n, won.Load(), exists.Load(), n-1)
	}
}

func testEmptyObject(t *testing.T, _ harness, b objstore.Bucket) {
	put(t, b, "empty", nil)
	if err := b.ReadAt(context.Background(), "empty", 0, nil); err != nil {
		t.Fatalf("ReadAt(0, 0) of an empty object: %v", err)
	}
	if err := b.ReadAt(context.Background(), "empty", 0, make([]byte, 1)); !errors.Is(err, objstore.ErrOutOfRange) {
		t.Fatalf("ReadAt(0, 1) of an empty object: got %v, want ErrOutOfRange", err)
	}
}

type listed struct {
	key  string
	size int64
}

func list(t *testing.T, b objstore.Bucket, prefix string) []listed {
	t.Helper()
	var got []listed
	if err := b.List(context.Background(), prefix, func(k string, n int64) error {
		got = append(got, listed{k, n})
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return got
}

func testList(t *testing.T, h harness, b objstore.Bucket) {
	// Byte order puts '-' (0x2d) before '/' (0x2f) before '0' (0x30): a store that lists by
	// walking directories gets "b/1" wrong unless it sorts as S3 does.
	keys := []string{"b0", "c/d/e", "b/1", "a", "b-1", "b/0/x"}
	for i, k := range keys {
		put(t, b, k, pattern(10+i, 0))
	}
	other := h.open(t, fmt.Sprintf("%s-other", t.Name()))
	put(t, other, "a", []byte("elsewhere"))
	want := []listed{{"a", 13}, {"b-1", 14}, {"b/0/x", 15}, {"b/1", 12}, {"b0", 10}, {"c/d/e", 11}}
	check := func(prefix string, want []listed) {
		t.Helper()
		got := list(t, b, prefix)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("List(%q) = %v, want %v", prefix, got, want)
		}
	}
	check("", want)
	check("b", want[1:5])
	check("b/", want[2:4])
	check("c/d/e", want[5:])
	check("zz", nil)
}

func testListStops(t *testing.T, _ harness, b objstore.Bucket) {
	for _, k := range []string{"1", "2", "3"} {
		put(t, b, k, []byte(k))
	}
	stop := errors.New("stop")
	var seen []string
	err := b.List(context.Background(), "", func(k string, _ int64) error {
		seen = append(seen, k)
		if k == "2" {
			return stop
		}
		return nil
	})
	if err != stop || fmt.Sprint(seen) != "[1 2]" {
		t.Fatalf("List stopping at 2: err %v, seen %v", err, seen)
	}
}

func testDelete(t *testing.T, _ harness, b objstore.Bucket) {
	put(t, b, "obj", []byte("one"))
	ctx := context.Background()
	if err := b.Delete(ctx, "obj"); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadAt(ctx, "obj", 0, make([]byte, 1)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadAt after Delete: got %v, want ErrNotFound", err)
	}
	if err := b.Delete(ctx, "obj"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if err := b.Delete(ctx, "never"); err != nil {
		t.Fatalf("Delete of a key never written: %v", err)
	}
	put(t, b, "obj", []byte("two")) // a deleted key may be written again
	if got := list(t, b, ""); fmt.Sprint(got) != "[{obj 3}]" {
		t.Fatalf("List after delete and rewrite: %v", got)
	}
}

// downBound is how long a call may take to report a down server: the SDK's three attempts
// against a refused port take about two seconds of backoff.
const downBound = 8 * time.Second

func testDown(t *testing.T, h harness, b objstore.Bucket) {
	put(t, b, "before", []byte("kept"))
	h.down(t)
	ctx := context.Background() // no deadline: the bucket itself must give up
	calls := map[string]func() error{
		"Put":    func() error { return b.Put(ctx, "during", bytes.NewReader([]byte("x")), 1) },
		"ReadAt": func() error { return b.ReadAt(ctx, "before", 0, make([]byte, 4)) },
		"List":   func() error { return b.List(ctx, "", func(string, int64) error { return nil }) },
		"Delete": func() error { return b.Delete(ctx, "before") },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		took := time.Since(start)
		if err == nil || errors.Is(err, objstore.ErrNotFound) || errors.Is(err, objstore.ErrExists) {
			t.Errorf("%s with the server down: got %v, want a transient error", name, err)
		}
		if took > downBound {
			t.Errorf("%s with the server down took %v, want under %v", name, took, downBound)
		}
	}
	h.up(t)
	got := make([]byte, 4)
	if err := b.ReadAt(ctx, "before", 0, got); err != nil || string(got) != "kept" {
		t.Fatalf("after the server came back: %q, %v", got, err)
	}
	put(t, b, "during", []byte("x"))
	if got := list(t, b, ""); fmt.Sprint(got) != "[{before 4} {during 1}]" {
		t.Fatalf("List after the outage: %v", got)
	}
}

func putIf(b objstore.Bucket, key string, data []byte, ifMatch string) (string, error) {
	return b.PutIf(context.Background(), key, bytes.NewReader(data), int64(len(data)), ifMatch)
}

func get(t *testing.T, b objstore.Bucket, key string) ([]byte, string) {
	t.Helper()
	data, etag, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return data, etag
}

func testPutIfReplaces(t *testing.T, _ harness, b objstore.Bucket) {
	v1, v2 := []byte("version 1"), []byte("version two")
	e1, err := putIf(b, "lease", v1, "")
	if err != nil || e1 == "" {
		t.Fatalf("PutIf of a new key: etag %q, %v", e1, err)
	}
	if _, err := putIf(b, "lease", v2, ""); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIf without ifMatch of an existing key: got %v, want ErrExists", err)
	}
	if data, etag := get(t, b, "lease"); !bytes.Equal(data, v1) || etag != e1 {
		t.Fatalf("Get after the first PutIf: %q %s, want %q %s", data, etag, v1, e1)
	}
	e2, err := putIf(b, "lease", v2, e1)
	if err != nil || e2 == "" || e2 == e1 {
		t.Fatalf("PutIf on the current ETag: etag %q (was %q), %v", e2, e1, err)
	}
	if data, etag := get(t, b, "lease"); !bytes.Equal(data, v2) || etag != e2 {
		t.Fatalf("Get after the replacing PutIf: %q %s, want %q %s", data, etag, v2, e2)
	}
	// The ETag Get returns is the one PutIf takes.
	_, etag := get(t, b, "lease")
	if _, err := putIf(b, "lease", v1, etag); err != nil {
		t.Fatalf("PutIf on Get's ETag: %v", err)
	}
}

func testPutIfStale(t *testing.T, _ harness, b objstore.Bucket) {
	e1, err := putIf(b, "lease", []byte("a"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := putIf(b, "lease", []byte("b"), e1); err != nil {
		t.Fatal(err)
	}
	_, err = putIf(b, "lease", []byte("c"), e1)
	if !errors.Is(err, objstore.ErrPreconditionFailed) || errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIf on a replaced ETag: got %v, want ErrPreconditionFailed (and not ErrExists)", err)
	}
	if data, _ := get(t, b, "lease"); string(data) != "b" {
		t.Fatalf("a failed PutIf changed the object: %q", data)
	}
}

func testPutIfMissing(t *testing.T, _ harness, b objstore.Bucket) {
	e, err := putIf(b, "other", []byte("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := putIf(b, "absent", []byte("y"), e); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("PutIf with ifMatch of a missing key: got %v, want ErrNotFound", err)
	}
	if _, _, err := b.Get(context.Background(), "absent"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the failed PutIf created the key: %v", err)
	}
}

func testConcurrentPutIfs(t *testing.T, _ harness, b objstore.Bucket) {
	e0, err := putIf(b, "lease", []byte("start"), "")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	var won, failed atomic.Int32
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := putIf(b, "lease", []byte(fmt.Sprintf("writer %d", i)), e0)
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, objstore.ErrPreconditionFailed):
				failed.Add(1)
			default:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// AWS may answer 409 ConditionalRequestConflict to a race; versitygw and Memory
		// serialise the check, so anything else fails here.
		t.Error(err)
	}
	if won.Load() != 1 || failed.Load() != n-1 {
		t.Fatalf("%d concurrent PutIfs on one ETag: %d succeeded, %d got ErrPreconditionFailed; want 1 and %d", n, won.Load(), failed.Load(), n-1)
	}
}

func testGetMissing(t *testing.T, _ harness, b objstore.Bucket) {
	if _, _, err := b.Get(context.Background(), "absent"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get of a missing key: got %v, want ErrNotFound", err)
	}
}

// prefixed shows a Memory under a key prefix, as OpenS3 shows a bucket.
type prefixed struct {
	m      *objstore.Memory
	prefix string
}

func (p prefixed) Put(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	return p.m.Put(ctx, p.prefix+key, body, size)
}
func (p prefixed) ReadAt(ctx context.Context, key string, off int64, dst []byte) error {
	return p.m.ReadAt(ctx, p.prefix+key, off, dst)
}
func (p prefixed) List(ctx context.Context, prefix string, fn func(string, int64) error) error {
	return p.m.List(ctx, p.prefix+prefix, func(k string, n int64) error { return fn(k[len(p.prefix):], n) })
}
func (p prefixed) Delete(ctx context.Context, key string) error {
	return p.m.Delete(ctx, p.prefix+key)
}
func (p prefixed) PutIf(ctx context.Context, key string, body io.ReadSeeker, size int64, ifMatch string) (string, error) {
	return p.m.PutIf(ctx, p.prefix+key, body, size, ifMatch)
}
func (p prefixed) Get(ctx context.Context, key string) ([]byte, string, error) {
	return p.m.Get(ctx, p.prefix+key)
}
