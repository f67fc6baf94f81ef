//go:build race

package e2e

// raceEnabled: the race detector slows the node several times over (more on 2 cores), so
// latency bounds that tell a stall from a slow answer are wider under it.
const raceEnabled = true
