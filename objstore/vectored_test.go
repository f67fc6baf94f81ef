package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"inlet/objstore"
	"inlet/objstore/objtest"
)

// parts splits pattern bytes into slices of uneven sizes, empty ones among them.
func parts(total int) ([][]byte, []byte) {
	whole := pattern(total, 7)
	var ps [][]byte
	for off, i := 0, 0; off < total; i++ {
		n := min(total-off, 1+(i*7919)%(3<<20))
		if i%5 == 0 {
			ps = append(ps, nil)
		}
		ps = append(ps, whole[off:off+n])
		off += n
	}
	return ps, whole
}

// TestBuffersReadsAndSeeks: a Buffers reads, and writes itself, as its parts laid end to end,
// from any position.
func TestBuffersReadsAndSeeks(t *testing.T) {
	ps, whole := parts(10 << 20)
	b := objstore.NewBuffers(ps)
	if b.Len() != int64(len(whole)) {
		t.Fatalf("Len %d, want %d", b.Len(), len(whole))
	}
	for _, at := range []int64{0, 1, 4095, int64(len(whole)) / 3, int64(len(whole)) - 1, int64(len(whole))} {
		if _, err := b.Seek(at, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, whole[at:]) {
			t.Fatalf("read from %d: %d bytes, not the parts' bytes from there", at, len(got))
		}
		if _, err := b.Seek(at, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		if n, err := b.WriteTo(&w); err != nil || n != int64(len(whole))-at || !bytes.Equal(w.Bytes(), whole[at:]) {
			t.Fatalf("WriteTo from %d: %d bytes, %v; not the parts' bytes from there", at, n, err)
		}
		if end, _ := b.Seek(0, io.SeekCurrent); end != b.Len() {
			t.Fatalf("WriteTo left the position at %d, not the end %d", end, b.Len())
		}
	}
}

// countedBody counts how a Buffers is sent: read through Read, or written by WriteTo.
type countedBody struct {
	*objstore.Buffers
	reads, writes atomic.Int32
}

func (c *countedBody) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Buffers.Read(p)
}

func (c *countedBody) WriteTo(w io.Writer) (int64, error) {
	c.writes.Add(1)
	return c.Buffers.WriteTo(w)
}

// TestS3PutBuffersWritesThePartsInPlace: a Buffers body over plain http reaches the bucket
// whole, written by its WriteTo and never read through Read (the slices go to the socket as
// they lie), a second Put of the key is ErrExists, and a Put after the server restarted (the
// pooled connection dead) lands.
func TestS3PutBuffersWritesThePartsInPlace(t *testing.T) {
	s := objtest.StartVersity(t)
	b := s.Open("vectored")
	ctx := context.Background()
	ps, whole := parts(40 << 20)
	body := &countedBody{Buffers: objstore.NewBuffers(ps)}
	if err := b.Put(ctx, "one", body, body.Len()); err != nil {
		t.Fatal(err)
	}
	if body.reads.Load() != 0 || body.writes.Load() == 0 {
		t.Fatalf("the body was read %d times and written %d: not written in place", body.reads.Load(), body.writes.Load())
	}
	got := make([]byte, len(whole))
	if err := b.ReadAt(ctx, "one", 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, whole) {
		t.Fatal("the object differs from the parts put")
	}
	if err := b.Put(ctx, "one", objstore.NewBuffers(ps), body.Len()); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("a second Put of the key: %v, want ErrExists", err)
	}
	s.Restart()
	small := objstore.NewBuffers([][]byte{[]byte("after "), []byte("a restart")})
	if err := b.Put(ctx, "two", small, small.Len()); err != nil {
		t.Fatalf("Put after the server restarted: %v", err)
	}
	got = make([]byte, small.Len())
	if err := b.ReadAt(ctx, "two", 0, got); err != nil || string(got) != "after a restart" {
		t.Fatalf("read back %q, %v", got, err)
	}
}

// TestS3PutBuffersRequest pins what the vectored PUT sends: the SDK's signed headers, the
// exact Content-Length, no Expect, the body whole; and that an error reply reaches the
// caller as the SDK reads it (412: ErrExists).
func TestS3PutBuffersRequest(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r)
		bodies = append(bodies, data)
		n := len(seen)
		mu.Unlock()
		if n > 1 {
			w.WriteHeader(http.StatusPreconditionFailed)
			io.WriteString(w, `<Error><Code>PreconditionFailed</Code><Message>exists</Message></Error>`)
		}
	}))
	t.Cleanup(srv.Close)
	b, err := objstore.OpenS3(context.Background(), objstore.S3Config{
		Bucket: "b", Endpoint: srv.URL, Region: "us-east-1", PathStyle: true, Prefix: "p",
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	ps, whole := parts(5 << 20)
	if err := b.Put(context.Background(), "obj", objstore.NewBuffers(ps), int64(len(whole))); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(context.Background(), "obj", objstore.NewBuffers(ps), int64(len(whole))); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("a 412 reply: %v, want ErrExists", err)
	}
	mu.Lock()
	defer mu.Unlock()
	r := seen[0]
	if r.Method != http.MethodPut || r.URL.Path != "/b/p/obj" || r.ContentLength != int64(len(whole)) {
		t.Fatalf("request %s %s, Content-Length %d", r.Method, r.URL.Path, r.ContentLength)
	}
	if r.Header.Get("If-None-Match") != "*" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") ||
		r.Header.Get("Expect") != "" || r.Header.Get("X-Amz-Content-Sha256") != "UNSIGNED-PAYLOAD" {
		t.Fatalf("headers %v", r.Header)
	}
	if !bytes.Equal(bodies[0], whole) {
		t.Fatal("the body sent differs from the parts")
	}
}

// TestS3PutBuffersCutShort: against a server that takes the body and never answers, a Put
// ends at its context's deadline.
func TestS3PutBuffersCutShort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var open atomic.Int32
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			open.Add(1)
			wg.Go(func() { io.Copy(io.Discard, c); c.Close() })
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	b, err := objstore.OpenS3(context.Background(), objstore.S3Config{
		Bucket: "b", Endpoint: "http://" + l.Addr().String(), Region: "us-east-1", PathStyle: true,
		Timeout: 5 * time.Second, MaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := parts(8 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = b.Put(ctx, "k", objstore.NewBuffers(ps), objstore.NewBuffers(ps).Len())
	if took := time.Since(start); err == nil || took > 2*time.Second {
		t.Fatalf("Put against a silent server: %v after %v, want the deadline's error", err, took)
	}
	if open.Load() == 0 {
		t.Fatal("no connection was made")
	}
}
