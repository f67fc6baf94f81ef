package batchlog

import (
	"testing"
	"time"

	"inlet/wire"
)

// TestProducerWindowsExpire: windows not written to for producer.id.expiration.ms are
// dropped, in memory and durably (a restart loads none of them), on both layouts; a window
// written since is kept, and one that expired and is written again after starts anew.
func TestProducerWindowsExpire(t *testing.T) {
	for _, layout := range []string{LayoutPebble, LayoutSegments} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{}
			l := openLayoutOpts(t, dir, layout, opts)
			topic, _ := l.CreateTopic("t", 1, nil)
			p := topic.Partitions[0]
			const producers = 5000
			for pid := int64(0); pid < producers; pid += 100 {
				appends := make([]Append, 0, 100)
				for i := int64(0); i < 100; i++ {
					appends = append(appends, idempotent(p, pid+i, 0, 0, 1, 'a'))
				}
				submitWait(t, l, appends...)
			}
			if got := expireProducers(l, time.Hour, time.Now().Add(30*time.Minute)); got != 0 {
				t.Fatalf("%d windows expired after 30 minutes of an hour", got)
			}
			// Producer 7 writes again two hours on: it is kept, the others go.
			later := time.Now().Add(2 * time.Hour)
			if got := expireProducers(l, time.Hour, later); got != producers {
				t.Fatalf("%d windows expired, want %d", got, producers)
			}
			if r := submitWait(t, l, idempotent(p, 7, 0, 1, 1, 'b')); r.Appends[0].Err == wire.ErrNone && r.Appends[0].BaseOffset != producers {
				t.Fatalf("producer 7 after expiry: %+v", r.Appends[0])
			}
			submitWait(t, l, idempotent(p, 8, 0, 0, 1, 'c')) // a new window
			if got := expireProducers(l, time.Hour, time.Now().Add(30*time.Minute)); got != 0 {
				t.Fatalf("%d fresh windows expired", got)
			}
			l.Close()

			l = openLayoutOpts(t, dir, layout, opts)
			defer l.Close()
			n := 0
			done := make(chan struct{})
			l.Submit(&Request{Inspect: func() { n = len(l.producers) }, Done: func(*Request) { close(done) }})
			<-done
			if n > 2 {
				t.Fatalf("%d producer windows loaded after the restart, want at most 2 (7 and 8)", n)
			}
			// Producer 8's window came back: its retry is a duplicate.
			if r := submitWait(t, l, idempotent(p, 8, 0, 0, 1, 'c')); r.Appends[0].BaseOffset == -1 || r.Appends[0].Err != wire.ErrNone {
				t.Fatalf("producer 8's retry after the restart: %+v", r.Appends[0])
			}
		})
	}
}

// expireProducers is the producer-expiry pass (package upkeep's ExpireProducers) with an
// expiration of exp, as of now.
func expireProducers(l *Log, exp time.Duration, now time.Time) int {
	return l.DropIdleProducers(now.Add(-exp))
}
