package batchlog

import "time"

// Producer windows expire (Kafka's producer.id.expiration.ms) so that memory and start-up
// time stay bounded however many short-lived producers a node has seen. The background pass
// (with retention, every RetentionCheckInterval) hands the committer a request of no appends
// whose Inspect drops every window not written to for the expiration time: the committer owns
// the windows, so nothing else touches them. The windows' keys are deleted from Pebble with the
// next group that carries metadata (at once with the pebble layout, at the next checkpoint
// with segments); a crash before that only brings them back until the next pass.

const defaultProducerIDExpiration = 24 * time.Hour

// ProducerIDExpiration is the expiration time in force (negative: never).
func (l *Log) ProducerIDExpiration() time.Duration {
	if l.opts.ProducerIDExpiration == 0 {
		return defaultProducerIDExpiration
	}
	return l.opts.ProducerIDExpiration
}

// ExpireProducers drops the producer windows not written to since now minus the expiration
// time, and returns how many it dropped.
func (l *Log) ExpireProducers(now time.Time) int {
	exp := l.ProducerIDExpiration()
	if exp < 0 || l.closed.Load() {
		return 0
	}
	cutoff := now.Add(-exp).UnixMilli()
	n := 0
	done := make(chan struct{})
	l.Submit(&Request{
		Inspect: func() { n = l.dropProducersBefore(cutoff) },
		Done:    func(*Request) { close(done) },
	})
	select {
	case <-done:
		return n
	case <-l.stop:
		// Closing: the committer may be gone before it takes the request.
		return 0
	}
}

// dropProducersBefore runs on the committer: it drops the windows last written before cutoff
// (unix ms). One changed since the last checkpoint is skipped by addMetadata unless it comes
// back before then.
func (l *Log) dropProducersBefore(cutoff int64) int {
	s := &l.scratch
	n := 0
	for k, st := range l.producers {
		if st.LastWrite >= cutoff || st.TxnFirstOffset >= 0 {
			continue // an open transaction keeps its window (its timeout ends it first)
		}
		delete(l.producers, k)
		delete(s.touched, k)
		s.expired = append(s.expired, k)
		n++
	}
	return n
}
