package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEmptyDirKeepsTheCopy: a takeover's emptying of the data directory removes everything
// but the standby's copy of the commit log, which the restore then reads.
func TestEmptyDirKeepsTheCopy(t *testing.T) {
	dir := t.TempDir()
	copyFile := filepath.Join(dir, followDir, "00000000000000000001")
	for _, p := range []string{filepath.Join(dir, "segments", "0.log"), filepath.Join(dir, writerEpochFile), copyFile} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := emptyDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != followDir {
		t.Fatalf("emptied directory holds %v, want only %s", entries, followDir)
	}
	if _, err := os.Stat(copyFile); err != nil {
		t.Fatalf("the copy lost its object: %v", err)
	}
}
