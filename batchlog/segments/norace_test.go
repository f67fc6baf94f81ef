//go:build !race

package segments

const raceEnabled = false
