package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"inlet/objstore"
)

var errInjected = errors.New("injected")

func TestMemoryFailNextFailsNCallsWithoutEffect(t *testing.T) {
	m := objstore.NewMemory()
	m.FailNext(objstore.OpPut, 2, errInjected)
	ctx := context.Background()
	for i := range 2 {
		if err := m.Put(ctx, "k", bytes.NewReader([]byte("v")), 1); !errors.Is(err, errInjected) {
			t.Fatalf("Put %d: got %v, want the injected error", i, err)
		}
	}
	if len(m.Keys()) != 0 {
		t.Fatalf("a failed Put left %v", m.Keys())
	}
	if err := m.Put(ctx, "k", bytes.NewReader([]byte("v")), 1); err != nil {
		t.Fatalf("third Put: %v", err)
	}
	// Other operations were never affected.
	if err := m.ReadAt(ctx, "k", 0, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if got := m.Calls(objstore.OpPut); got != 3 {
		t.Fatalf("Calls(OpPut) = %d, want 3 (failed calls count)", got)
	}
	if got := m.Calls(objstore.OpReadAt); got != 1 {
		t.Fatalf("Calls(OpReadAt) = %d, want 1", got)
	}
}

func TestMemoryLostReplyTakesEffect(t *testing.T) {
	m := objstore.NewMemory()
	m.LoseNextReply(objstore.OpPut, 1, errInjected)
	ctx := context.Background()
	if err := m.Put(ctx, "k", bytes.NewReader([]byte("v")), 1); !errors.Is(err, errInjected) {
		t.Fatalf("Put: got %v, want the injected error", err)
	}
	// The retry a caller makes then finds the object: the case an uploader must handle.
	if err := m.Put(ctx, "k", bytes.NewReader([]byte("v")), 1); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retried Put: got %v, want ErrExists", err)
	}
	if fmt.Sprint(m.Keys()) != "[k]" {
		t.Fatalf("Keys = %v", m.Keys())
	}
	m.LoseNextReply(objstore.OpDelete, 1, errInjected)
	if err := m.Delete(ctx, "k"); !errors.Is(err, errInjected) {
		t.Fatalf("Delete: %v", err)
	}
	if len(m.Keys()) != 0 {
		t.Fatalf("a Delete whose reply was lost left %v", m.Keys())
	}
}

func TestMemoryPutIfLostReplyTakesEffect(t *testing.T) {
	m := objstore.NewMemory()
	ctx := context.Background()
	e1, err := m.PutIf(ctx, "lease", bytes.NewReader([]byte("v1")), 2, "")
	if err != nil {
		t.Fatal(err)
	}
	m.LoseNextReply(objstore.OpPutIf, 1, errInjected)
	if _, err := m.PutIf(ctx, "lease", bytes.NewReader([]byte("v2")), 2, e1); !errors.Is(err, errInjected) {
		t.Fatalf("PutIf: got %v, want the injected error", err)
	}
	// The retry on the same ETag meets the write that landed; reading back tells it apart.
	if _, err := m.PutIf(ctx, "lease", bytes.NewReader([]byte("v2")), 2, e1); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("retried PutIf: got %v, want ErrPreconditionFailed", err)
	}
	m.FailNext(objstore.OpGet, 1, errInjected)
	if _, _, err := m.Get(ctx, "lease"); !errors.Is(err, errInjected) {
		t.Fatalf("Get: got %v, want the injected error", err)
	}
	data, etag, err := m.Get(ctx, "lease")
	if err != nil || string(data) != "v2" || etag == e1 {
		t.Fatalf("Get after the lost reply: %q %s %v", data, etag, err)
	}
	if m.Calls(objstore.OpPutIf) != 3 || m.Calls(objstore.OpGet) != 2 {
		t.Fatalf("Calls: putif %d get %d, want 3 and 2", m.Calls(objstore.OpPutIf), m.Calls(objstore.OpGet))
	}
}

func TestMemoryDownUntilCleared(t *testing.T) {
	m := objstore.NewMemory()
	ctx := context.Background()
	m.SetDown(errInjected)
	if err := m.Put(ctx, "k", bytes.NewReader(nil), 0); !errors.Is(err, errInjected) {
		t.Fatalf("Put while down: %v", err)
	}
	if err := m.List(ctx, "", func(string, int64) error { return nil }); !errors.Is(err, errInjected) {
		t.Fatalf("List while down: %v", err)
	}
	m.SetDown(nil)
	if err := m.Put(ctx, "k", bytes.NewReader(nil), 0); err != nil {
		t.Fatalf("Put after down: %v", err)
	}
}

func TestMemoryDelayHonoursContext(t *testing.T) {
	m := objstore.NewMemory()
	m.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := m.ReadAt(ctx, "k", 0, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadAt with a delay past the deadline: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the delay ignored the context: %v", took)
	}
	m.SetDelay(30 * time.Millisecond)
	start = time.Now()
	_ = m.ReadAt(context.Background(), "k", 0, nil)
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("a 30ms delay took %v", took)
	}
}

// TestMemoryPutReadsBodyOnce pins Memory's side of Put's contract: the body is read from its
// start, once, and a body shorter than size is an error that stores nothing.
func TestMemoryPutReadsBodyOnce(t *testing.T) {
	m := objstore.NewMemory()
	body := &genReader{size: 1 << 20}
	body.Seek(1000, 0) // Put must rewind
	if err := m.Put(context.Background(), "k", body, body.size); err != nil {
		t.Fatal(err)
	}
	if got := body.read.Load(); got != body.size {
		t.Fatalf("Put read %d bytes of a %d-byte body", got, body.size)
	}
	obj, _ := m.Object("k")
	if obj[0] != genByte(0) || obj[len(obj)-1] != genByte(body.size-1) {
		t.Fatal("stored object differs from the body")
	}
	if err := m.Put(context.Background(), "short", bytes.NewReader([]byte("abc")), 4); err == nil {
		t.Fatal("a body shorter than size was accepted")
	}
	if err := m.Put(context.Background(), "neg", bytes.NewReader(nil), -1); err == nil {
		t.Fatal("a negative size was accepted")
	}
	if fmt.Sprint(m.Keys()) != "[k]" {
		t.Fatalf("Keys = %v", m.Keys())
	}
}

// TestMemoryConcurrentUse runs every operation from several goroutines (with -race, the
// mutex's coverage) while faults are switched.
func TestMemoryConcurrentUse(t *testing.T) {
	m := objstore.NewMemory()
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				k := fmt.Sprintf("%d/%03d", g, i%20)
				_ = m.Put(ctx, k, bytes.NewReader([]byte(k)), int64(len(k)))
				_ = m.ReadAt(ctx, k, 0, make([]byte, 2))
				_ = m.List(ctx, fmt.Sprint(g), func(string, int64) error { return nil })
				if i%3 == 0 {
					_ = m.Delete(ctx, k)
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			m.FailNext(objstore.OpPut, 1, errInjected)
			m.SetDown(errInjected)
			m.SetDown(nil)
			_ = m.Keys()
		}
	})
	wg.Wait()
	var total int64
	for op := objstore.OpPut; op <= objstore.OpDelete; op++ {
		total += m.Calls(op)
	}
	if want := int64(4 * (200*3 + 67)); total != want {
		t.Fatalf("counted %d calls, want %d", total, want)
	}
}

// FuzzMemoryReadAt checks Memory's range rule against its statement: ReadAt(off, n) of a size-
// byte object succeeds exactly when 0 <= off and off+n <= size (without overflow), and then
// returns the object's bytes; otherwise it fails with ErrOutOfRange and never panics.
func FuzzMemoryReadAt(f *testing.F) {
	f.Add(uint16(100), int64(0), uint16(100))
	f.Add(uint16(100), int64(100), uint16(0))
	f.Add(uint16(100), int64(101), uint16(0))
	f.Add(uint16(0), int64(-1), uint16(1))
	f.Add(uint16(10), int64(9223372036854775807), uint16(2))
	f.Fuzz(func(t *testing.T, size uint16, off int64, n uint16) {
		m := objstore.NewMemory()
		data := pattern(int(size), 7)
		put(t, m, "k", data)
		dst := make([]byte, n)
		err := m.ReadAt(context.Background(), "k", off, dst)
		inside := off >= 0 && off <= int64(size) && int64(n) <= int64(size)-off
		switch {
		case inside && err != nil:
			t.Fatalf("ReadAt(%d, %d) of %d bytes: %v", off, n, size, err)
		case inside && !bytes.Equal(dst, data[off:off+int64(n)]):
			t.Fatalf("ReadAt(%d, %d) of %d bytes: wrong bytes", off, n, size)
		case !inside && !errors.Is(err, objstore.ErrOutOfRange):
			t.Fatalf("ReadAt(%d, %d) of %d bytes: got %v, want ErrOutOfRange", off, n, size, err)
		}
	})
}
