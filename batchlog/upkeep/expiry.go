package upkeep

import "time"

// Producer windows expire (Kafka's producer.id.expiration.ms) so that memory and start-up
// time stay bounded however many short-lived producers a node has seen. The background pass
// (with retention, every RetentionCheckInterval) asks the committer to drop every window not
// written to for the expiration time (Log.DropIdleProducers): the committer owns the windows,
// so nothing else touches them. The windows' keys are deleted from Pebble with the next group
// that carries metadata (at once with the pebble layout, at the next checkpoint with
// segments); a crash before that only brings them back until the next pass.

const defaultProducerIDExpiration = 24 * time.Hour

// ProducerExpiration is the expiration time in force (negative: never).
func (c Config) ProducerExpiration() time.Duration {
	if c.ProducerIDExpiration == 0 {
		return defaultProducerIDExpiration
	}
	return c.ProducerIDExpiration
}

// ExpireProducers drops the producer windows not written to since now minus the expiration
// time, and returns how many it dropped.
func (u *Upkeep) ExpireProducers(now time.Time) int {
	exp := u.cfg.ProducerExpiration()
	if exp < 0 {
		return 0
	}
	return u.log.DropIdleProducers(now.Add(-exp))
}
