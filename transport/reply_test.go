package transport

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

// TestRepliesCompletedOutOfOrderAreWrittenInOrder: a reply is written only once every earlier
// slot is filled; a skipped slot (acks=0) lets later replies go and writes nothing; replies
// that become writable together go out in one writev.
func TestRepliesCompletedOutOfOrderAreWrittenInOrder(t *testing.T) {
	tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
	w := &writes{}
	c := tr.NewConn(w, "test", nil)
	var rs []*Request
	for i := range 6 {
		rs = append(rs, c.Inject(body(i, 8)))
	}
	if c.Pending() != 6 {
		t.Fatalf("pending %d, want 6", c.Pending())
	}
	answer := func(i int) {
		if i == 4 {
			rs[i].Skip()
		} else {
			rs[i].Reply(outOf([]byte(fmt.Sprint("reply ", i))))
		}
		rs[i].Release()
	}
	answer(2)
	answer(4)
	answer(5)
	if got := w.written(); len(got) != 0 {
		t.Fatalf("written before request 0 was answered: %q", got)
	}
	answer(0)
	if got := w.written(); len(got) != 1 || string(got[0]) != "reply 0" {
		t.Fatalf("after 0: %q", got)
	}
	answer(1) // 1 and 2 are next: one writev
	answer(3) // 3, 4 (skipped) and 5
	want := []string{"reply 0", "reply 1", "reply 2", "reply 3", "reply 5"}
	got := w.written()
	if len(got) != len(want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Fatalf("written %q, want %q", got, want)
		}
	}
	if w.calls != 3 {
		t.Errorf("%d writes, want 3 (0; then 1 and 2 together; then 3 and 5)", w.calls)
	}
	if c.Pending() != 0 {
		t.Errorf("pending %d after every reply", c.Pending())
	}
	checkIdle(t, tr)
}

// TestReplyOrderUnderConcurrency: replies completed by many goroutines in random order leave
// in request order (run it with -race).
func TestReplyOrderUnderConcurrency(t *testing.T) {
	tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
	w := &writes{}
	c := tr.NewConn(w, "test", nil)
	const n = 500
	rs := make([]*Request, n)
	for i := range rs {
		rs[i] = c.Inject(body(i, 8))
	}
	perm := rand.New(rand.NewSource(1)).Perm(n)
	var wg sync.WaitGroup
	for _, i := range perm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%7 == 3 {
				rs[i].Skip()
			} else {
				rs[i].Reply(outOf([]byte(fmt.Sprint(i))))
			}
			rs[i].Release()
		}()
	}
	wg.Wait()
	var want [][]byte
	for i := range n {
		if i%7 != 3 {
			want = append(want, []byte(fmt.Sprint(i)))
		}
	}
	got := w.written()
	if len(got) != len(want) {
		t.Fatalf("%d replies written, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("reply %d is %q, want %q", i, got[i], want[i])
		}
	}
	checkIdle(t, tr)
}

// TestReleaseBeforeReplyPanics: a request released before its slot is filled would leave the
// connection's later replies waiting for ever; released twice, it would return its budget
// twice. Both are bugs in the handler, and panic.
func TestReleaseBeforeReplyPanics(t *testing.T) {
	tr := New(Config{Budget: 1 << 20, MaxFrame: 1 << 20})
	c := tr.NewConn(&writes{}, "test", nil)
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		f()
	}
	r := c.Inject(body(0, 8))
	mustPanic("Release before Reply", r.Release)
	r.Skip()
	mustPanic("a second Reply", r.Skip)
	r.Release()
	mustPanic("a second Release", r.Release)
}
