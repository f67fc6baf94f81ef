package metrics

import "inlet/batchlog"

// Commits is what cmd/inlet sets as batchlog.Options.Observer, and the state collector reads
// the log through Log.
var (
	_ batchlog.Observer = (*Commits)(nil)
	_ Log               = (*batchlog.Log)(nil)
)
