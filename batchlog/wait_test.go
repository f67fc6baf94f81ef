package batchlog

import (
	"testing"
	"time"
)

// TestWaiterSignalledByItsPartitionsOnly guards the long poll's wake-up: a waiter watching
// partition 0 is signalled, before the produce is answered, by an append to partition 0 and
// not by appends to partition 1; after Stop nothing signals it.
func TestWaiterSignalledByItsPartitionsOnly(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	topic, err := l.CreateTopic("t", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := topic.Partitions[0], topic.Partitions[1]
	w := GetWaiter()
	w.Watch(p0)
	w.Watch(p0) // a fetch may name a partition twice
	for range 5 {
		submitWait(t, l, plain(p1, 1, 'b'))
	}
	select {
	case <-w.C():
		t.Fatal("signalled by appends to an unwatched partition")
	default:
	}
	submitWait(t, l, plain(p0, 2, 'a'), plain(p0, 1, 'c'))
	select {
	case <-w.C(): // before Done ran: no wait needed
	default:
		t.Fatal("not signalled by the time an append to the watched partition was answered")
	}
	select {
	case <-w.C():
		t.Fatal("a second signal held: C holds one")
	default:
	}
	PutWaiter(w)
	if n := p0.waiters.n.Load(); n != 0 {
		t.Fatalf("%d waiters on partition 0 after Stop (watched twice); want 0", n)
	}
	w2 := GetWaiter()
	defer PutWaiter(w2)
	w2.Watch(p1)
	submitWait(t, l, plain(p0, 1, 'd'), plain(p1, 1, 'e'))
	select {
	case <-w2.C():
	case <-time.After(time.Second):
		t.Fatal("a pooled waiter watching partition 1 was not signalled")
	}
}

// TestWaiterSignalledWhenItsTopicIsDeleted: a long poll parked on a partition of a topic that
// is deleted is woken, so that it answers UNKNOWN_TOPIC_OR_PARTITION at once.
func TestWaiterSignalledWhenItsTopicIsDeleted(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	topic, err := l.CreateTopic("gone", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.CreateTopic("stays", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, bystander := GetWaiter(), GetWaiter()
	defer PutWaiter(w)
	defer PutWaiter(bystander)
	w.Watch(topic.Partitions[0])
	bystander.Watch(other.Partitions[0])
	if err := l.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter on a deleted topic was not signalled")
	}
	select {
	case <-bystander.C():
		t.Fatal("a waiter on another topic was signalled")
	default:
	}
}
