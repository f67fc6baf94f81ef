package upkeep

import (
	"testing"
	"time"
)

// TestConfigDefaultsAreKafkas: the zero Config is Kafka's log.retention.check.interval.ms
// (5 minutes) and producer.id.expiration.ms (24 hours); a negative value stays off.
func TestConfigDefaultsAreKafkas(t *testing.T) {
	var c Config
	if c.CheckInterval() != 5*time.Minute || c.ProducerExpiration() != 24*time.Hour {
		t.Fatalf("defaults %v and %v, want 5m and 24h", c.CheckInterval(), c.ProducerExpiration())
	}
	c = Config{RetentionCheckInterval: -1, ProducerIDExpiration: -1}
	if c.CheckInterval() >= 0 || c.ProducerExpiration() >= 0 {
		t.Fatalf("negative settings became %v and %v", c.CheckInterval(), c.ProducerExpiration())
	}
}

// TestBackgroundPassesRunUntilClose: Start runs retention every interval, and Close stops the
// goroutine with the log still open (twice is fine).
func TestBackgroundPassesRunUntilClose(t *testing.T) {
	l := openTemp(t, t.TempDir())
	defer l.Close()
	tp, _ := l.CreateTopic("old", 1, map[string]string{"retention.ms": "1000"})
	p := tp.Partitions[0]
	submitWait(t, l, plain(p, 2, 1)) // max timestamp 0: long expired
	u := Start(l, Config{RetentionCheckInterval: time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for p.LogStartOffset() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the background pass never moved the log start")
		}
		time.Sleep(time.Millisecond)
	}
	u.Close()
	u.Close()
	submitWait(t, l, plain(p, 2, 2))
	time.Sleep(20 * time.Millisecond)
	if got := p.LogStartOffset(); got != 2 {
		t.Fatalf("log start %d after Close; a pass ran", got)
	}
}
