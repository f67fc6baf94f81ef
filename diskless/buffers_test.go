package diskless

import (
	"testing"
	"time"

	"inlet/batchlog"
	"inlet/objstore"
)

// TestObjectsFillWithoutGrowing: a commit object's buffer is made once at CommitBytes (or
// taken from a landed object) and groups are copied into it without growing it; a group that
// would pass CommitBytes opens the next object, and a landed object's buffer is taken by the
// next one. Copying into growing buffers was most of a diskless node's CPU.
func TestObjectsFillWithoutGrowing(t *testing.T) {
	const commitBytes = 1 << 20
	c := New(Config{Bucket: objstore.NewMemory(), CommitBytes: commitBytes})
	p := &batchlog.Partition{Topic: "d"}
	b := batch(1, 0, 1, 'a')
	group := func(n int) *batchlog.DisklessGroup {
		g := &batchlog.DisklessGroup{}
		for range n {
			g.Appends = append(g.Appends, &batchlog.Append{Partition: p, Batch: b})
		}
		return g
	}
	per := (commitBytes - headerLen) / (entryOverhead + len(b))
	c.Commit(group(per / 2))
	if len(c.objects) != 1 {
		t.Fatalf("%d objects after one group, want 1", len(c.objects))
	}
	first := c.objects[0]
	want := cap(first.buf)
	if want < commitBytes+trailerLen {
		t.Fatalf("an object's buffer has capacity %d, want at least CommitBytes+trailer %d", want, commitBytes+trailerLen)
	}
	if cap(first.buf) != want {
		t.Fatalf("the object's buffer grew from %d to %d", want, cap(first.buf))
	}
	c.Commit(group(per - per/2))
	if len(c.objects) != 1 || cap(first.buf) != want {
		t.Fatalf("filling the object to CommitBytes: %d objects, capacity %d (was %d)", len(c.objects), cap(first.buf), want)
	}
	c.Commit(group(1))
	if len(c.objects) != 2 {
		t.Fatalf("a group past CommitBytes went into the full object (%d objects, %d bytes)", len(c.objects), len(first.buf))
	}
	if len(first.buf) > commitBytes {
		t.Fatalf("an object holds %d bytes, past CommitBytes %d", len(first.buf), commitBytes)
	}
	landed := first.buf[:1]
	c.mu.Lock()
	c.objects = c.objects[1:]
	c.recycle(first)
	c.objects[0].sealed = true
	c.mu.Unlock()
	c.Commit(group(1))
	if len(c.objects) != 2 || &c.objects[1].buf[:1][0] != &landed[0] {
		t.Fatal("the next object did not take the landed object's buffer")
	}
}

// TestIdleKeepsOneBuffer: the buffers of objects landed together are kept for the next
// objects while groups keep coming, and all but one are let go once the loop has been idle
// for idleTrim.
func TestIdleKeepsOneBuffer(t *testing.T) {
	g := newGated()
	n := openNode(t, t.TempDir(), g, Config{CommitBytes: 1 << 20}, false)
	defer n.close()
	p := n.topic("d", true).Partitions[0]
	release := g.holdPut(1)
	first := n.send(appendOf(p, -1, 0, 1, 1))
	eventually(t, "object 1's PUT started", func() bool { return g.tries(1) == 1 })
	var rest []*produce
	for i := range 3 {
		rest = append(rest, n.send(appendOf(p, -1, 0, 1, byte(2+i))))
		eventually(t, "the next object landed", func() bool { return g.has(uint64(2 + i)) })
	}
	release()
	for _, pr := range append(rest, first) {
		pr.wait(t, 5*time.Second)
	}
	free := func() int {
		n.c.mu.Lock()
		defer n.c.mu.Unlock()
		return len(n.c.free)
	}
	if k := free(); k < 3 {
		t.Fatalf("%d free buffers after 4 objects landed together, want them kept", k)
	}
	time.Sleep(idleTrim + 200*time.Millisecond)
	if k := free(); k != 1 {
		t.Fatalf("%d free buffers after %v idle, want 1", k, idleTrim)
	}
}
