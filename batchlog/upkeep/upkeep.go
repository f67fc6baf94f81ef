// Package upkeep keeps a batchlog.Log within its limits: retention moves log starts past
// expired batches (and, on topics with remote storage, local log starts past the batches the
// remote tier holds that local retention expires: Config.Tier), compaction keeps the latest record of each key of compacted topics, the
// reclaim deletes the segment files no live batch needs (copying forward the few that pin
// them), and producer expiry drops idle producer windows. Each is a pass over the log's
// exported operations (batchlog's upkeep_ops.go); the log itself runs none of them.
//
// What runs: Start starts one goroutine that every Config.RetentionCheckInterval runs
// EnforceRetention (retention, then compaction, then the reclaim, all inside one
// Log.RunPass, so under the log's retainMu) and then ExpireProducers (a request to the
// committer, outside RunPass). Tests, and admin paths that want a pass at once, call the two
// directly. A pass waits on the committer for what it changes (relocations, the windows'
// drop); the committer never waits on a pass.
//
// State: the tombstones' delete horizon (when passes compacted each partition up to where,
// compact.go) is the Upkeep's, in memory, touched only inside RunPass. Everything durable
// (log starts, compacted-to marks, relocated keys) is the log's.
//
// Each pass is a method taking the *batchlog.Pass of the RunPass it runs in (retain,
// compactTopics, reclaim), so a test can run one alone; EnforceRetention runs the three.
//
// Files: upkeep.go (Start, Config, the background goroutine), retention.go (EnforceRetention
// and retention), compact.go (compaction), reclaim.go (the reclaim's cost rule), expiry.go
// (producer expiry).
//
// Lock order: none of its own. Its passes hold the log's retainMu (Log.RunPass) while they
// wait on the committer, which only TryLocks it.
package upkeep

import (
	"log/slog"
	"sync"
	"time"

	"inlet/batchlog"
)

// Config configures Start. Its zero value is Kafka's defaults.
type Config struct {
	// RetentionCheckInterval is how often the passes run in the background (default 5
	// minutes, Kafka's log.retention.check.interval.ms); negative: never (tests run them by
	// hand).
	RetentionCheckInterval time.Duration
	// ProducerIDExpiration is Kafka's producer.id.expiration.ms: a producer window with no
	// write for this long is dropped by the background pass (default 24 hours; negative:
	// never). A producer that writes again after that starts a new window, as on Kafka.
	ProducerIDExpiration time.Duration
	// Logger receives what the passes did (default slog.Default()).
	Logger *slog.Logger
	// Tier is the remote tier, asked by retention about the topics with remote.storage.enable
	// (retention.go). Nil: there is none, and such topics are retained as if all local.
	Tier Tier
}

// Tier is what retention asks of the remote tier about a topic with remote.storage.enable.
// Its methods run inside Log.RunPass, holding the log's retainMu: they must be quick and
// must not wait for anything that takes it (RunPass, DeleteRecords, DeleteTopic).
type Tier interface {
	// UploadedEnd is the offset below which p's batches are all in recorded remote objects.
	UploadedEnd(p *batchlog.Partition) int64
}

// hooks are what tests change in the passes beyond Config (start).
type hooks struct {
	// noRelocate keeps the reclaim from copying batches forward: it deletes only segments no
	// live batch is in (BenchmarkMixedRetentionSpace compares).
	noRelocate bool
	// compactPace and compactChunk replace compactBytesPerSec and compactChunk.
	compactPace, compactChunk int
}

// Upkeep runs the passes on one log.
type Upkeep struct {
	log    *batchlog.Log
	cfg    Config
	hooks  hooks
	logger *slog.Logger
	// passes: per partition id, when compaction passes compacted it up to where (compact.go),
	// for tombstones' delete horizon; touched only inside Log.RunPass.
	passes map[uint32][]cleanPass

	stop     chan struct{}
	stopOnce sync.Once
	done     sync.WaitGroup
}

// Start returns the passes of l and, unless cfg.RetentionCheckInterval is negative or l
// stores nothing, starts the goroutine that runs them. Close it before closing l.
func Start(l *batchlog.Log, cfg Config) *Upkeep { return start(l, cfg, hooks{}) }

// start is Start with test hooks.
func start(l *batchlog.Log, cfg Config, h hooks) *Upkeep {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	u := &Upkeep{log: l, cfg: cfg, hooks: h, logger: cfg.Logger, passes: map[uint32][]cleanPass{}, stop: make(chan struct{})}
	if iv := cfg.CheckInterval(); iv >= 0 && l.Stores() {
		u.done.Add(1)
		go u.run(iv)
	}
	return u
}

// run is the background goroutine.
func (u *Upkeep) run(every time.Duration) {
	defer u.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-u.stop:
			return
		case <-t.C:
			if err := u.EnforceRetention(time.Now()); err != nil {
				u.logger.Error("batchlog: retention", "err", err)
			}
			if n := u.ExpireProducers(time.Now()); n > 0 {
				u.logger.Info("batchlog: producer windows expired", "count", n)
			}
		}
	}
}

// Close stops the background goroutine, after the pass under way (which stops early, between
// partitions), and waits for it. The log stays open.
func (u *Upkeep) Close() {
	u.stopOnce.Do(func() { close(u.stop) })
	u.done.Wait()
}

// stopping reports whether Close has begun.
func (u *Upkeep) stopping() bool {
	select {
	case <-u.stop:
		return true
	default:
		return false
	}
}
