package wire

import (
	"strings"
	"unicode/utf8"
)

// MaxStringLength is the longest string Kafka's protocol carries: its generated readers refuse
// a STRING or COMPACT_STRING longer than 0x7fff bytes ("string field groupId had invalid
// length", in every *Data.read), whatever the length prefix could say. kmsg reads longer
// compact strings (v8+ OffsetCommit, for one), so the names Inlet keeps (group ids, member and
// instance ids, transactional ids) are checked against it where they arrive: every stored key
// codec then round-trips every name that is accepted (the offset key's u16 lengths hold it).
const MaxStringLength = 0x7fff

// ValidName reports whether s may be kept as a name (group id, member id, instance id,
// protocol name, transactional id): at most MaxStringLength bytes of valid UTF-8. Kafka
// decodes every string as UTF-8; a name that is not would not survive the JSON records it is
// stored in (Go replaces bad bytes with U+FFFD), so it is refused rather than changed.
func ValidName(s string) bool { return len(s) <= MaxStringLength && utf8.ValidString(s) }

// CleanString returns s as valid UTF-8 (each run of bad bytes becomes U+FFFD) of at most max
// bytes, cut at a character boundary: for strings kept only to be shown again (a client id in
// DescribeGroups), which are not worth refusing a request over.
func CleanString(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
