//go:build race

package batchlog

const raceEnabled = true
