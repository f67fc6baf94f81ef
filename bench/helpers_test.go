package bench

import (
	"path/filepath"
	"strings"
	"testing"
)

// fixtureFiles reads testdata/results as if it were the results directory of a root at
// testdata.
func fixtureFiles(t *testing.T) []*File {
	t.Helper()
	files, err := ReadFiles("testdata", filepath.Join("testdata", "results"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q; it is:\n%s", what, w, text)
		}
	}
}
