package objtest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"inlet/objstore"
)

// TestFaultProxyInjectsEachFault: through the proxy, an S3 client (objstore over the AWS SDK,
// with its three attempts) sees each fault as a bucket would show it: untouched requests and
// added latency pass; every request failed or cut fails the call and stores nothing; a PUT
// whose reply is lost is stored, and the SDK's retry of it meets its own object (ErrExists);
// Down fails the call fast, and clearing it serves again.
func TestFaultProxyInjectsEachFault(t *testing.T) {
	s := StartVersity(t)
	px := StartFaultProxy(t, s.Endpoint, 1)
	cfg := s.Config("px/")
	cfg.Endpoint = px.URL
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := objstore.OpenS3(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	direct := s.Open("px/")
	body := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB: a cut falls mid-body
	put := func(key string) error { return b.Put(ctx, key, bytes.NewReader(body), int64(len(body))) }
	exists := func(key string) bool {
		err := direct.ReadAt(ctx, key, 0, make([]byte, 1))
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	if err := put("plain"); err != nil {
		t.Fatalf("untouched: %v", err)
	}
	px.Set(Faults{Latency: 200 * time.Millisecond})
	began := time.Now()
	if err := put("slow"); err != nil {
		t.Fatalf("latency: %v", err)
	}
	if d := time.Since(began); d < 200*time.Millisecond {
		t.Fatalf("latency: the put took %v, want at least 200ms", d)
	}

	px.Set(Faults{Fail: 1})
	if err := put("failed"); err == nil || exists("failed") {
		t.Fatalf("every request failed: put %v, stored %v; want an error and nothing stored", err, exists("failed"))
	}
	if px.Stats().Failed.Load() < 2 {
		t.Fatalf("failed %d requests, want the SDK's attempts (3)", px.Stats().Failed.Load())
	}

	px.Set(Faults{Cut: 1})
	if err := put("cut"); err == nil || exists("cut") {
		t.Fatalf("every request cut: put %v, stored %v; want an error and nothing stored", err, exists("cut"))
	}

	px.Set(Faults{LoseReplies: 1})
	err = put("lost")
	if !errors.Is(err, objstore.ErrExists) || !exists("lost") {
		t.Fatalf("every reply lost: put %v, stored %v; want ErrExists (the retry meets its own object) and the object stored", err, exists("lost"))
	}
	if px.Stats().LostReplies.Load() != 1 {
		t.Fatalf("lost %d replies, want 1 (the retry's 412 passes)", px.Stats().LostReplies.Load())
	}

	px.Set(Faults{Down: true})
	began = time.Now()
	if err := put("down"); err == nil || exists("down") {
		t.Fatalf("down: put %v, stored %v; want an error and nothing stored", err, exists("down"))
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("down: the put failed after %v, want within the SDK's backoff (about 2 s)", d)
	}
	px.Set(Faults{})
	if err := put("back"); err != nil {
		t.Fatalf("after down: %v", err)
	}
}
