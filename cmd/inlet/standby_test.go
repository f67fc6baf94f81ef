package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriterEpochRoundTrip: the epoch a writer records reads back; a directory without the
// file reads 0; a directory not made yet is made; a file of another length is an error.
func TestWriterEpochRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if e, err := readWriterEpoch(dir); err != nil || e != 0 {
		t.Fatalf("no file: %d, %v", e, err)
	}
	if err := writeWriterEpoch(dir, 7); err != nil {
		t.Fatal(err)
	}
	if e, err := readWriterEpoch(dir); err != nil || e != 7 {
		t.Fatalf("after writing 7: %d, %v", e, err)
	}
	if err := os.WriteFile(filepath.Join(dir, writerEpochFile), []byte{1}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readWriterEpoch(dir); err == nil {
		t.Fatal("a 1-byte epoch file read")
	}
	if err := emptyDir(dir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("emptied directory holds %d entries", len(entries))
	}
	if err := writeWriterEpoch("", 1); err != nil {
		t.Fatal(err)
	}
}
