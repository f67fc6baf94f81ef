package batchlog

import (
	"testing"
	"time"

	"inlet/wire"
)

// onCommitter runs f on the committer goroutine and waits for it.
func onCommitter(l *Log, f func()) {
	done := make(chan struct{})
	l.Submit(&Request{Inspect: f, Done: func(*Request) { close(done) }})
	<-done
}

func windowsHeld(l *Log) int {
	n := 0
	onCommitter(l, func() { n = len(l.producers) })
	return n
}

// TestProducerWindowBoundRefusesWhileLive: at MaxProducerWindows with every window written
// within ProducerIdleEviction, a new producer's batch is refused THROTTLING_QUOTA_EXCEEDED and
// nothing is stored, while the producers holding windows go on, duplicates still detected.
func TestProducerWindowBoundRefusesWhileLive(t *testing.T) {
	l := openLayoutOpts(t, t.TempDir(), LayoutSegments, Options{MaxProducerWindows: 100, ProducerIdleEviction: time.Hour})
	defer l.Close()
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	for pid := int64(0); pid < 100; pid++ {
		if r := submitWait(t, l, idempotent(p, pid, 0, 0, 1, 'a')); r.Appends[0].Err != wire.ErrNone {
			t.Fatalf("producer %d: %d", pid, r.Appends[0].Err)
		}
	}
	r := submitWait(t, l, idempotent(p, 100, 0, 0, 1, 'x'))
	if r.Appends[0].Err != wire.ErrThrottlingQuotaExceeded {
		t.Fatalf("producer 100 past the bound: error %d, want THROTTLING_QUOTA_EXCEEDED", r.Appends[0].Err)
	}
	if hw := p.HighWatermark(); hw != 100 {
		t.Fatalf("high watermark %d after a refused batch, want 100", hw)
	}
	// Producer 5 goes on, and its retry is still a duplicate.
	if r := submitWait(t, l, idempotent(p, 5, 0, 1, 1, 'b')); r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 100 {
		t.Fatalf("producer 5: %+v", r.Appends[0])
	}
	if r := submitWait(t, l, idempotent(p, 5, 0, 1, 1, 'b')); r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 100 {
		t.Fatalf("producer 5's retry: %+v, want the duplicate's offset 100", r.Appends[0])
	}
	if n := windowsHeld(l); n != 100 {
		t.Fatalf("%d windows held, want 100", n)
	}
	st := l.Stats().Producers
	if st.Held != 100 || st.Refused != 1 || st.Evicted != 0 {
		t.Fatalf("stats %+v, want 100 held, 1 refused, none evicted", st)
	}
}

// TestProducerWindowBoundEvictsLeastRecentIdle: once windows are idle, a new producer evicts
// the least recently written one; the producer written last keeps its window (its retry is a
// duplicate), and an evicted producer that writes again starts a new window, as after expiry.
func TestProducerWindowBoundEvictsLeastRecentIdle(t *testing.T) {
	l := openLayoutOpts(t, t.TempDir(), LayoutSegments, Options{MaxProducerWindows: 10, ProducerIdleEviction: time.Millisecond})
	defer l.Close()
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	for pid := int64(0); pid < 10; pid++ {
		submitWait(t, l, idempotent(p, pid, 0, 0, 1, 'a'))
		time.Sleep(2 * time.Millisecond) // distinct last writes
	}
	submitWait(t, l, idempotent(p, 0, 0, 1, 1, 'b')) // 0 is now the most recent, 1 the least
	time.Sleep(2 * time.Millisecond)
	if r := submitWait(t, l, idempotent(p, 10, 0, 0, 1, 'c')); r.Appends[0].Err != wire.ErrNone {
		t.Fatalf("producer 10: %d", r.Appends[0].Err)
	}
	var has0, has1 bool
	onCommitter(l, func() {
		_, has0 = l.producers[producerKey{0, p.ID}]
		_, has1 = l.producers[producerKey{1, p.ID}]
	})
	if !has0 || has1 {
		t.Fatalf("after one eviction: window of 0 held %v (want true), of 1 held %v (want false)", has0, has1)
	}
	if r := submitWait(t, l, idempotent(p, 0, 0, 1, 1, 'b')); r.Appends[0].BaseOffset != 10 {
		t.Fatalf("producer 0's retry: %+v, want the duplicate's offset 10", r.Appends[0])
	}
	// Producer 1 writes its next batch: a new window (evicting 2), appended.
	time.Sleep(2 * time.Millisecond)
	if r := submitWait(t, l, idempotent(p, 1, 0, 1, 1, 'd')); r.Appends[0].Err != wire.ErrNone || r.Appends[0].BaseOffset != 12 {
		t.Fatalf("evicted producer 1 writing again: %+v", r.Appends[0])
	}
	if n := windowsHeld(l); n != 10 {
		t.Fatalf("%d windows held, want 10", n)
	}
	if st := l.Stats().Producers; st.Evicted != 2 || st.Held != 10 {
		t.Fatalf("stats %+v, want 2 evicted, 10 held", st)
	}
}

// TestProducerWindowBoundPerPrincipal: one principal at its bound is refused while another
// still makes windows, and evicts only its own idle windows.
func TestProducerWindowBoundPerPrincipal(t *testing.T) {
	l := openLayoutOpts(t, t.TempDir(), LayoutSegments, Options{MaxProducerWindows: 100, MaxProducerWindowsPerPrincipal: 5, ProducerIdleEviction: time.Hour})
	defer l.Close()
	topic, _ := l.CreateTopic("t", 1, nil)
	p := topic.Partitions[0]
	as := func(principal string, pid int64, seq int32) int16 {
		r := &Request{Appends: []Append{idempotent(p, pid, 0, seq, 1, 'a')}, Principal: principal}
		done := make(chan struct{})
		r.Done = func(*Request) { close(done) }
		l.Submit(r)
		<-done
		return r.Appends[0].Err
	}
	for pid := int64(0); pid < 5; pid++ {
		if code := as("hostile", pid, 0); code != wire.ErrNone {
			t.Fatalf("hostile producer %d: %d", pid, code)
		}
	}
	if code := as("hostile", 5, 0); code != wire.ErrThrottlingQuotaExceeded {
		t.Fatalf("hostile producer 5 past its bound: %d", code)
	}
	for pid := int64(100); pid < 105; pid++ {
		if code := as("good", pid, 0); code != wire.ErrNone {
			t.Fatalf("good producer %d: %d", pid, code)
		}
	}
	// With its windows idle, the hostile principal evicts its own oldest, not good's.
	onCommitter(l, func() { l.opts.ProducerIdleEviction = time.Nanosecond })
	time.Sleep(2 * time.Millisecond)
	if code := as("hostile", 5, 0); code != wire.ErrNone {
		t.Fatalf("hostile producer 5 with idle windows: %d", code)
	}
	var good int
	onCommitter(l, func() { good = l.windows.OwnerLen("good") })
	if good != 5 {
		t.Fatalf("good holds %d windows, want 5", good)
	}
}

// TestProducerWindowBoundAtLoad: windows beyond the bound that come back at a restart (a
// lower bound, or evictions whose deletes a crash lost) are dropped as they load, the least
// recently written first, and durably.
func TestProducerWindowBoundAtLoad(t *testing.T) {
	for _, layout := range []string{LayoutPebble, LayoutSegments} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			l := openLayoutOpts(t, dir, layout, Options{MaxProducerWindows: 50})
			topic, _ := l.CreateTopic("t", 1, nil)
			p := topic.Partitions[0]
			for pid := int64(0); pid < 50; pid++ {
				submitWait(t, l, idempotent(p, pid, 0, 0, 1, 'a'))
				time.Sleep(time.Millisecond) // distinct last writes, ms apart
			}
			l.Close()
			l = openLayoutOpts(t, dir, layout, Options{MaxProducerWindows: 20})
			if n := windowsHeld(l); n != 20 {
				t.Fatalf("%d windows after a restart with a bound of 20", n)
			}
			// 49, written last, kept its window: its retry is a duplicate.
			if r := submitWait(t, l, idempotent(p, 49, 0, 0, 1, 'a')); r.Appends[0].BaseOffset != 49 {
				t.Fatalf("producer 49's retry after the restart: %+v", r.Appends[0])
			}
			l.Close()
			l = openLayoutOpts(t, dir, layout, Options{MaxProducerWindows: 1000})
			defer l.Close()
			if n := windowsHeld(l); n != 20 {
				t.Fatalf("%d windows after a second restart, want the 20 kept", n)
			}
		})
	}
}
