package batchlog

import (
	"context"
	"log/slog"
	"time"

	"inlet/batchlog/segments"
	"inlet/meta"
	"inlet/segfs"
)

// newWithStore builds a Log around a test store; nothing is recovered.
func newWithStore(s Store, opts Options) *Log {
	if opts.MaxGroupBytes <= 0 {
		opts.MaxGroupBytes = defaultMaxGroupBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.OnFatal == nil {
		opts.OnFatal = func(err error) { panic(err) }
	}
	l := &Log{opts: opts, log: opts.Logger, store: s, topics: map[string]*Topic{},
		producers: map[producerKey]*window{}, meta: meta.Discard(opts.Logger)}
	l.start()
	return l
}

// waitIdle returns once every submitted request has been answered.
func (l *Log) waitIdle(ctx context.Context) error {
	done := make(chan struct{})
	l.Submit(&Request{Done: func(*Request) { close(done) }})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// withoutFinalCheckpoint makes Close leave the metadata changed since the last checkpoint to
// replay, as a crash does. Call it before Close (the committer reads it once Close stops it).
func (l *Log) withoutFinalCheckpoint() *Log {
	l.noFinalCheckpoint = true
	return l
}

// verifyFunc is a TxnVerifier answering with a function.
type verifyFunc func(transactionalID string, producerID int64, epoch int16, topic string, partition int32) bool

func (f verifyFunc) Verify(transactionalID string, producerID int64, epoch int16, topic string, partition int32) bool {
	return f(transactionalID, producerID, epoch, topic, partition)
}

// What the tests of package batchlog_test use of the package's internals: those tests run the
// upkeep passes, and package upkeep imports this one.

var (
	SubmitWait     = submitWait
	SealBatch      = sealBatch
	OpenLayoutOpts = openLayoutOpts
	MustTopic      = mustTopic
)

const (
	SegmentsBuffered = segmentsBuffered
	RaceEnabled      = raceEnabled
)

// OpenNoSpaceRetry is Open with writes retried noSpaceRetry after a full disk suspends them.
func OpenNoSpaceRetry(opts Options, noSpaceRetry time.Duration) (*Log, error) {
	return open(opts, noSpaceRetry)
}

// WithoutFinalCheckpoint makes Close leave the metadata changed since the last checkpoint to
// replay, as a crash does (withoutFinalCheckpoint).
func (l *Log) WithoutFinalCheckpoint() *Log { return l.withoutFinalCheckpoint() }

// SetSegmentBytes changes the size at which the log starts a new segment file.
func (l *Log) SetSegmentBytes(n int64) {
	l.opts.SegmentBytes = n
	l.segs.SetSegmentBytes(n)
}

// The segment format's and the store's constants some tests here need.
const (
	segEntryHeader            = segments.EntryHeaderLen
	blockSize                 = segfs.BlockSize
	defaultCheckpointInterval = segments.DefaultCheckpointInterval
)
