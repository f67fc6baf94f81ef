//go:build race

package wire

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation counts
// mean nothing under it (the pooled gzip and lz4 decoders).
const raceEnabled = true
