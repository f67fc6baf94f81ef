// Package human prints the benchmark harness's numbers and command lines for people: counts
// with thousands separators, latencies in µs, ms or s, byte counts in MiB, fixed decimals,
// and shell-quoted command lines. A value that is not finite prints as "–".
//
// Files: human.go.
package human

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Thousands prints v rounded to an integer with commas between groups of three digits.
func Thousands(v float64) string {
	if !finite(v) {
		return "–"
	}
	neg := v < 0
	s := strconv.FormatFloat(math.Abs(math.Round(v)), 'f', 0, 64)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Micros prints a latency given in microseconds with three significant digits in µs, ms or s.
func Micros(us float64) string {
	switch {
	case !finite(us):
		return "–"
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + " µs"
	case us < 1e6:
		return strconv.FormatFloat(us/1e3, 'f', 2, 64) + " ms"
	default:
		return strconv.FormatFloat(us/1e6, 'f', 2, 64) + " s"
	}
}

// MiB prints a byte count in MiB.
func MiB(b float64) string {
	if !finite(b) {
		return "–"
	}
	return strconv.FormatFloat(b/(1<<20), 'f', 0, 64) + " MiB"
}

// Fixed prints v with prec decimals, "–" when not finite.
func Fixed(v float64, prec int) string {
	if !finite(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// MicrosOrNone is Micros, or "–" for 0: a latency that was not recorded.
func MicrosOrNone(us float64) string {
	if us == 0 {
		return "–"
	}
	return Micros(us)
}

// Runs prints a count of runs with the failed ones: "3", or "3 (1 failed)".
func Runs(runs, failed int) string {
	if failed > 0 {
		return fmt.Sprintf("%d (%d failed)", runs, failed)
	}
	return fmt.Sprint(runs)
}

// Ratio prints a ratio with two decimals and "×", "–" for none.
func Ratio(r *float64) string {
	if r == nil {
		return "–"
	}
	return Fixed(*r, 2) + "×"
}

// ShortCommit is a git commit hash cut to 12 characters.
func ShortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// CommandLine renders args as one shell command line, quoting what the shell would split or
// expand.
func CommandLine(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = shellQuote(a)
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%{}", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
