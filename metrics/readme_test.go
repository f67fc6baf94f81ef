package metrics

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/diskless"
	"inlet/docs"
	"inlet/groups"
	"inlet/objstore"
	"inlet/tier"
)

// TestREADMEListsEveryMetric keeps the metrics table of docs/metrics.md equal to what the
// registry exports under inlet_: every family is listed, and nothing listed is gone.
func TestREADMEListsEveryMetric(t *testing.T) {
	s := docs.File(t, "docs/metrics.md")
	begin, end := strings.Index(s, "<!-- metrics:begin"), strings.Index(s, "<!-- metrics:end -->")
	if begin < 0 || end < begin {
		t.Fatal("docs/metrics.md has no metrics:begin/metrics:end table")
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(s[begin:end], "\n") {
		if m := regexp.MustCompile("^\\| `(inlet_[a-z0-9_]+)` \\|").FindStringSubmatch(line); m != nil {
			listed[m[1]] = true
		}
	}

	m := New([]int16{0}, "test", "")
	log, err := batchlog.Open(batchlog.Options{Dir: t.TempDir(), Observer: m.Commits, MaxGroupBytes: 1 << 20, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if _, err := log.CreateTopic("t", 1, nil); err != nil {
		t.Fatal(err)
	}
	m.Watch(log, fakeNode{offsets: []groups.CommittedOffset{{Group: "g", Topic: "t", Partition: 0, Offset: 0}}})
	m.WatchRemote(fakeRemote{})
	m.WatchLease(&stubLease{})
	m.WatchFollower(&stubFollower{})
	m.WatchRecordCache(tier.NewRecordCache())
	m.DisklessObserver()
	m.WatchDiskless(diskless.New(diskless.Config{Bucket: objstore.NewMemory()}))
	m.Requests.Error(0, 3) // error series appear with the first error
	m.Requests.ListenerEvent("PLAINTEXT", nil)
	m.Requests.ListenerEvent("PLAINTEXT", errors.New("accept: too many open files"))
	m.Requests.AcceptThrottled(time.Millisecond)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		if name := mf.GetName(); strings.HasPrefix(name, "inlet_") {
			exported[name] = true
			if !listed[name] {
				t.Errorf("docs/metrics.md's table does not list %s", name)
			}
		}
	}
	for name := range listed {
		if !exported[name] {
			t.Errorf("docs/metrics.md lists %s, which is not exported", name)
		}
	}
}

// fakeRemote is a remote tier for the metrics table: its counters are what a scrape reads.
type fakeRemote struct{}

func (fakeRemote) Stats() tier.Stats { return tier.Stats{Healthy: true} }
