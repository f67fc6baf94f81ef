// Package bytesize parses byte counts written the way Inlet's flags, config file and the
// benchmark harness write them: a whole number with an optional KiB/MiB/GiB (or K/M/G, also
// powers of two) suffix. It has no dependencies, so the broker's config and the tools that
// drive the broker share one parser.
//
// Files: bytesize.go.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse parses a positive byte count with an optional KiB/MiB/GiB (or K/M/G, also powers
// of two) suffix.
func Parse(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, suf.s) {
			s, mult = strings.TrimSuffix(s, suf.s), suf.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a positive byte count", v)
	}
	return n * mult, nil
}

// ParseOrZero is Parse, with "0" allowed: a setting turned off.
func ParseOrZero(v string) (int64, error) {
	if strings.TrimSpace(v) == "0" {
		return 0, nil
	}
	return Parse(v)
}
