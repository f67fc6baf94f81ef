package batchlog

import "time"

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

// WithoutFinalCheckpoint is opts with Close leaving the metadata changed since the last
// checkpoint to replay, as a crash does.
func WithoutFinalCheckpoint(opts Options) Options {
	opts.noFinalCheckpoint = true
	return opts
}

// SetSegmentBytes changes the size at which the log starts a new segment file.
func (l *Log) SetSegmentBytes(n int64) {
	l.opts.SegmentBytes = n
	l.segs.segBytes = n
}
