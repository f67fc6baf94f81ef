package bench

import (
	"math"
	"slices"
)

// median returns the median of xs (the mean of the middle two for an even count) and false
// for an empty slice. NaN values are ignored.
func median(xs []float64) (float64, bool) {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// ratio returns a/b, false when b is zero or either is not finite.
func ratio(a, b float64) (float64, bool) {
	if b == 0 || !finite(a) || !finite(b) {
		return 0, false
	}
	return a / b, true
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// perMillion returns x per million records, 0 when no records were acknowledged.
func perMillion(x float64, records uint64) float64 {
	if records == 0 {
		return 0
	}
	return x / (float64(records) / 1e6)
}
