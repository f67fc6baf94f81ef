package crashtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStartUpWithoutSegmentsRefuses: the binary, stopped cleanly after acknowledging records,
// finds its catalog but no segments/ directory (lost as a young node's was, its name never
// synced). It must exit with an error naming the directory, not serve the topic as empty, and
// leave the data directory as it was: with segments/ back, every record is there.
func TestStartUpWithoutSegmentsRefuses(t *testing.T) {
	n := startInlet(t)
	produceRecords(t, "tenant-a.events", 50, kgo.SeedBrokers(n.addr()), kgo.AllowAutoTopicCreation())
	n.sigterm()
	n.waitExit(10 * time.Second)

	segs := filepath.Join(n.dir, "segments")
	if err := os.Rename(segs, segs+".away"); err != nil {
		t.Fatal(err)
	}
	if err := n.tryStart(); err == nil {
		t.Fatal("the node started with segments/ gone and a topic in its catalog")
	}
	if !n.logged(segs+" is missing") || !n.logged(`tenant-a.events`) {
		t.Fatalf("the refusal does not name the directory and the topic:\n%s", n.logTail(5))
	}
	if _, err := os.Stat(segs); !os.IsNotExist(err) {
		t.Fatalf("a refused start made segments/ again (%v)", err)
	}
	if err := os.Rename(segs+".away", segs); err != nil {
		t.Fatal(err)
	}
	n.start()
	got := consumeRecords(t, "tenant-a.events", "g", 50, kgo.SeedBrokers(n.addr()))
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	for i := range 50 {
		if v := fmt.Sprintf("a %d", i); !seen[v] {
			t.Fatalf("record %q is gone after segments/ came back", v)
		}
	}
}
