//go:build race

package crashtest

// raceEnabled: under go test -race the node is built with the race detector too, and any race
// it reports in its log fails the test that ran it.
const raceEnabled = true
