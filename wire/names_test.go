package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCleanString: CleanString always returns valid UTF-8 of at most max bytes, returns valid
// input of at most max bytes unchanged, and never panics; ValidName accepts exactly the valid
// UTF-8 strings of at most MaxStringLength bytes.
func FuzzCleanString(f *testing.F) {
	f.Add("client", 10)
	f.Add("c\xff\xfe\xe2\x82", 3)
	f.Add(strings.Repeat("é", 40), 7)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		got := CleanString(s, max)
		if !utf8.ValidString(got) || len(got) > max {
			t.Fatalf("CleanString(%q, %d) = %q", s, max, got)
		}
		if utf8.ValidString(s) && len(s) <= max && got != s {
			t.Fatalf("CleanString changed a valid string %q to %q", s, got)
		}
		if utf8.ValidString(s) && !strings.HasPrefix(s, got) {
			t.Fatalf("CleanString(%q, %d) = %q is not a prefix", s, max, got)
		}
		if ValidName(s) != (utf8.ValidString(s) && len(s) <= MaxStringLength) {
			t.Fatalf("ValidName(%q)", s)
		}
	})
}

func TestValidNameAtTheLimit(t *testing.T) {
	if !ValidName(strings.Repeat("g", MaxStringLength)) || ValidName(strings.Repeat("g", MaxStringLength+1)) || ValidName("g\xff") {
		t.Fatal("ValidName disagrees with Kafka's 32767-byte UTF-8 strings")
	}
}
