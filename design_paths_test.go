package inlet_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoPath is a code span that reads as a path inside the repository: slash-separated names,
// no spaces, perhaps a glob (results/tail-*.txt) or a trailing slash.
var repoPath = regexp.MustCompile("`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.*-]+)+/?)`")

// TestDesignNamesPathsThatExist fails when DESIGN.md, or a note of docs/experiments behind it,
// names a file or folder of the repository that is not there (a package renamed, a file moved
// or deleted). Only code spans whose first element is a top-level folder of the repository are
// checked, so on-disk names of a running node (`segments/NNNNNNNNNN.seg`) and paths outside it
// (`/proc`) are left alone; a span with a glob must match at least one path.
func TestDesignNamesPathsThatExist(t *testing.T) {
	pages, err := filepath.Glob("docs/experiments/design-*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"DESIGN.md"}, pages...)
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, m := range repoPath.FindAllStringSubmatch(string(text), -1) {
			p := strings.TrimSuffix(m[1], "/")
			top, _, _ := strings.Cut(p, "/")
			if st, err := os.Stat(top); err != nil || !st.IsDir() || strings.HasPrefix(top, ".") {
				continue
			}
			checked++
			if strings.Contains(p, "*") {
				if found, _ := filepath.Glob(p); len(found) == 0 {
					t.Errorf("%s names %s, which matches nothing in the repository", page, m[1])
				}
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s names %s, which is not in the repository", page, m[1])
			}
		}
		if page == "DESIGN.md" && checked < 50 {
			t.Errorf("DESIGN.md: only %d repository paths found; is the pattern still right?", checked)
		}
	}
}
