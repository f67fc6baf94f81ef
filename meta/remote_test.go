package meta

import (
	"slices"
	"strings"
	"testing"
)

// TestSaveRemoteObjectsSurviveRestart: the records saved in one batch read back after a
// reopen, by partition and base; a batch with a key too long to record saves none of them.
func TestSaveRemoteObjectsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	objs := []RemoteObject{
		{Partition: 2, Base: 0, End: 10, DataLen: 100, Size: 150, MaxTimestamp: 7, Batches: 3, UploadedMs: 11, Key: "t/2/a"},
		{Partition: 1, Base: 10, End: 20, DataLen: 100, Size: 150, MaxTimestamp: 8, Batches: 2, UploadedMs: 12, Key: "t/1/b"},
		{Partition: 1, Base: 0, End: 10, DataLen: 100, Size: 150, MaxTimestamp: 9, Batches: 1, UploadedMs: 13, Key: "t/1/a"},
	}
	if err := s.SaveRemoteObjects(objs); err != nil {
		t.Fatal(err)
	}
	long := RemoteObject{Partition: 3, Base: 0, End: 1, DataLen: 1, Size: 2, Batches: 1, Key: strings.Repeat("k", 1<<16)}
	if err := s.SaveRemoteObjects([]RemoteObject{{Partition: 3, Base: 5, End: 6, DataLen: 1, Size: 2, Batches: 1, Key: "t/3/a"}, long}); err == nil {
		t.Fatal("a key of 65536 bytes was recorded")
	}
	s.Close()
	s = openTemp(t, dir)
	defer s.Close()
	var got []RemoteObject
	if err := s.RemoteObjects(func(o RemoteObject) error { got = append(got, o); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []RemoteObject{objs[2], objs[1], objs[0]}
	if !slices.Equal(got, want) {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
}
