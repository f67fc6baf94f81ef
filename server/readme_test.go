package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"inlet/docs"
)

// TestREADMEListsSupportedAPIs keeps the API table of docs/kafka-compatibility.md equal to
// what ApiVersions advertises.
func TestREADMEListsSupportedAPIs(t *testing.T) {
	s := docs.File(t, "docs/kafka-compatibility.md")
	begin := strings.Index(s, "<!-- apis:begin")
	end := strings.Index(s, "<!-- apis:end -->")
	if begin < 0 || end < begin {
		t.Fatal("docs/kafka-compatibility.md has no apis:begin/apis:end table")
	}
	got := map[string]bool{}
	for _, line := range strings.Split(s[begin:end], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.Contains(line, "---") || strings.Contains(line, "key") {
			continue
		}
		got[strings.TrimSpace(cells[2])+" "+strings.TrimSpace(cells[3])] = true
	}
	want := map[string]bool{}
	for _, k := range SupportedAPIs() {
		want[fmt.Sprintf("%d %d–%d", k.ApiKey, k.MinVersion, k.MaxVersion)] = true
		if name := kmsg.NameForKey(k.ApiKey); name == "" {
			t.Errorf("api key %d has no name", k.ApiKey)
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("docs/kafka-compatibility.md is missing api %q (key versions)", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("docs/kafka-compatibility.md lists %q, which ApiVersions does not advertise", k)
		}
	}
}
