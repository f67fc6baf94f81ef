package batchlog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestBadMetadataKeysAreSkippedAtStartup: a stored key of the log's that is not record data
// and does not decode (a compacted-to mark) is named in an error logged at start-up and
// skipped; the log opens and everything else loads (the catalog's keys: meta's
// TestBadCatalogKeysAreSkippedAtLoad). A bad key of a partition's log state still stops
// start-up, naming it.
func TestBadMetadataKeysAreSkippedAtStartup(t *testing.T) {
	dir := t.TempDir()
	l := openTemp(t, dir)
	if _, err := l.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	cleaned := append(partKey(nil, kindCleaned, 7), 0)
	for _, kv := range [][2][]byte{
		{cleaned[:], []byte{1}},
	} {
		if err := l.db.Set(kv[0], kv[1], pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()

	var logs lockedBuffer
	opts := Options{Dir: dir, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("open with bad metadata keys: %v", err)
	}
	if _, ok := l.Topic("t"); !ok {
		t.Fatal("the topic did not load")
	}
	out := logs.String()
	for _, k := range [][]byte{cleaned[:]} {
		if !strings.Contains(out, quoteKey(k)) {
			t.Errorf("key %s not named in the log:\n%s", quoteKey(k), out)
		}
	}
	if n := strings.Count(out, "level=ERROR"); n != 1 {
		t.Errorf("%d errors logged, want 1:\n%s", n, out)
	}
	// Log state is record data: a bad high watermark key still stops start-up.
	h := append(partKey(nil, kindHigh, 3), 0)
	if err := l.db.Set(h[:], []byte{1}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err := Open(opts); err == nil {
		l.Close()
		t.Fatal("a bad high watermark key did not stop start-up")
	} else if !strings.Contains(err.Error(), quoteKey(h[:])) {
		t.Fatalf("the error does not name the key: %v", err)
	}
}
