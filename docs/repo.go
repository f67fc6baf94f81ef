package docs

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the repository's root, the directory holding go.mod, found from the working
// directory up (a package's tests run in its folder), so a test that reads a page stays right
// wherever its package moves. For tests only: it fails t when there is none.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// File is the text of the repository's file rel (a path from Root).
func File(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
