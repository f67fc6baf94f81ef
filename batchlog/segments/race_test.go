//go:build race

package segments

const raceEnabled = true
