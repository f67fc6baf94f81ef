package batchlog_test

import (
	. "inlet/batchlog"
	"inlet/batchlog/upkeep"
)

// The package's test helpers, for the tests here that run the upkeep passes (export_test.go).
var (
	submitWait     = SubmitWait
	sealBatch      = SealBatch
	openLayoutOpts = OpenLayoutOpts
	mustTopic      = MustTopic
)

const (
	segmentsBuffered = SegmentsBuffered
	raceEnabled      = RaceEnabled
)

// passes returns l's upkeep passes, run by the test (none in the background).
func passes(l *Log) *upkeep.Upkeep { return upkeep.Start(l, upkeep.Config{RetentionCheckInterval: -1}) }
