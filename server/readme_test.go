package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestREADMEListsSupportedAPIs keeps the API table of docs/kafka-compatibility.md equal to
// what ApiVersions advertises.
func TestREADMEListsSupportedAPIs(t *testing.T) {
	s := repoFile(t, "docs/kafka-compatibility.md")
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

// repoFile reads a file of the repository, found from the test's directory up to go.mod, so
// the test stays right wherever its package moves.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = filepath.Dir(dir)
	}
}
