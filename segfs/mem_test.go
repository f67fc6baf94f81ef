package segfs

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
)

func TestCrashKeepsOnlySyncedDataAndNames(t *testing.T) {
	m := NewCrashableMem()
	MkdirAllSynced(m, "/d")
	a, _ := m.Create("/d/a")
	a.WriteV([][]byte{[]byte("hello")}, 0)
	m.SyncDir("/d")
	a.Datasync()
	a.WriteV([][]byte{[]byte(" world")}, 5) // unsynced
	b, _ := m.Create("/d/b")                // name unsynced
	b.WriteV([][]byte{[]byte("x")}, 0)
	b.Datasync()

	c := m.Crash(SyncedOnly, nil, nil)
	files := c.Files()
	if len(files) != 1 || string(files["/d/a"]) != "hello" {
		t.Fatalf("after crash: %q", files)
	}
	// The original goes on unchanged.
	if got := m.Files(); string(got["/d/a"]) != "hello world" || string(got["/d/b"]) != "x" {
		t.Fatalf("original changed: %q", got)
	}
	// A removal not followed by SyncDir is undone by a crash.
	m.Remove("/d/a")
	if _, ok := m.Crash(SyncedOnly, nil, nil).Files()["/d/a"]; !ok {
		t.Fatal("unsynced removal survived the crash")
	}
	m.SyncDir("/d")
	if _, ok := m.Crash(SyncedOnly, nil, nil).Files()["/d/a"]; ok {
		t.Fatal("synced removal undone by the crash")
	}
}

func TestTornPrefixKeepsAPrefixOfTheUnsyncedWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	full := bytes.Repeat([]byte("abcdefgh"), 1000)
	for range 200 {
		m := NewCrashableMem()
		MkdirAllSynced(m, "/d")
		f, _ := m.Create("/d/f")
		m.SyncDir("/d")
		f.WriteV([][]byte{full[:3000]}, 0)
		f.Datasync()
		f.WriteV([][]byte{full[3000:5000]}, 3000)
		f.WriteV([][]byte{full[5000:]}, 5000)
		got := m.Crash(TornPrefix, rng, nil).Files()["/d/f"]
		if len(got) < 3000 || !bytes.Equal(got, full[:len(got)]) {
			t.Fatalf("torn file of %d bytes is not a prefix of at least the synced 3000", len(got))
		}
	}
}

func TestDirectWritesMustBeAligned(t *testing.T) {
	m := NewCrashableMem()
	MkdirAllSynced(m, "/d")
	f, _ := m.Create("/d/f")
	d, _ := m.OpenDirect("/d/f")
	if _, err := d.WriteV([][]byte{make([]byte, 100)}, 0); err == nil {
		t.Fatal("unaligned length accepted")
	}
	if _, err := d.WriteV([][]byte{make([]byte, BlockSize)}, 100); err == nil {
		t.Fatal("unaligned offset accepted")
	}
	if end, err := d.WriteV([][]byte{make([]byte, BlockSize)}, BlockSize); err != nil || end != 2*BlockSize {
		t.Fatalf("aligned write: %d %v", end, err)
	}
	if n, _ := f.Size(); n != 2*BlockSize {
		t.Fatalf("size %d", n)
	}
}

func TestInjectedErrorsChangeNothing(t *testing.T) {
	m := NewCrashableMem()
	MkdirAllSynced(m, "/d")
	f, _ := m.Create("/d/f")
	m.Inject(func(op Op, name string) error {
		if op == OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	if _, err := f.WriteV([][]byte{[]byte("x")}, 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write: %v", err)
	}
	if n, _ := f.Size(); n != 0 {
		t.Fatalf("failed write left %d bytes", n)
	}
	m.Inject(nil)
	if _, err := f.WriteV([][]byte{[]byte("x")}, 0); err != nil {
		t.Fatal(err)
	}
}

func TestProcessKillKeepsUnsyncedDataForALaterCrashToLose(t *testing.T) {
	m := NewCrashableMem()
	MkdirAllSynced(m, "/d")
	f, _ := m.Create("/d/f")
	m.SyncDir("/d")
	f.WriteV([][]byte{[]byte("synced")}, 0)
	f.Datasync()
	f.WriteV([][]byte{[]byte(" cached")}, 6)
	g, _ := m.Create("/d/g") // name not synced

	k := m.Crash(ProcessKill, nil, nil)
	got := k.Files()
	if _, ok := got["/d/g"]; string(got["/d/f"]) != "synced cached" || !ok {
		t.Fatalf("after a process kill: %q", got)
	}
	got = k.Crash(SyncedOnly, nil, nil).Files()
	if _, ok := got["/d/g"]; string(got["/d/f"]) != "synced" || ok {
		t.Fatalf("power loss after the kill: %q", got)
	}
	_ = g
}

func TestShortWriteKeepsItsPrefix(t *testing.T) {
	m := NewCrashableMem()
	MkdirAllSynced(m, "/d")
	f, _ := m.Create("/d/f")
	m.Inject(func(op Op, name string) error { return &ShortWrite{N: 3, Err: syscall.ENOSPC} })
	end, err := f.WriteV([][]byte{[]byte("hello")}, 0)
	if !errors.Is(err, syscall.ENOSPC) || end != 3 || string(m.Files()["/d/f"]) != "hel" {
		t.Fatalf("short write: end %d, err %v, file %q", end, err, m.Files()["/d/f"])
	}
}

// A directory is a name in its parent: made and never synced there, it is gone after a power
// loss with everything in it, however well its own files and entries were synced. The loss
// that took a young node's segments/ with every acknowledged record.
func TestCrashLosesADirectoryWhoseParentWasNotSynced(t *testing.T) {
	m := NewCrashableMem()
	if err := m.Mkdir("/data"); err != nil {
		t.Fatal(err)
	}
	if err := m.Mkdir("/data/segments"); err != nil {
		t.Fatal(err)
	}
	f, _ := m.Create("/data/segments/1.seg")
	f.WriteV([][]byte{[]byte("acked")}, 0)
	f.Datasync()
	m.SyncDir("/data/segments")
	if files := m.Crash(SyncedOnly, nil, nil).Files(); len(files) != 0 {
		t.Fatalf("a directory whose name was never synced survived: %q", files)
	}
	m.SyncDir("/") // /data's name, but not segments/ in it
	c := m.Crash(SyncedOnly, nil, nil)
	if files := c.Files(); len(files) != 0 {
		t.Fatalf("segments/ survived without a sync of /data: %q", files)
	}
	if _, err := c.List("/data/segments"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("List of the lost directory: %v", err)
	}
	m.SyncDir("/data")
	if files := m.Crash(SyncedOnly, nil, nil).Files(); string(files["/data/segments/1.seg"]) != "acked" {
		t.Fatalf("after syncing every parent: %q", files)
	}
	// A process kill keeps unsynced names, for a later power loss to lose.
	m2 := NewCrashableMem()
	m2.Mkdir("/x")
	k := m2.Crash(ProcessKill, nil, nil)
	if _, err := k.List("/x"); err != nil {
		t.Fatalf("a process kill lost a directory: %v", err)
	}
	if _, err := k.Crash(SyncedOnly, nil, nil).List("/x"); err == nil {
		t.Fatal("an unsynced directory survived a kill and then a power loss")
	}
}

func TestMkdirAllSyncedMakesEveryParentDurable(t *testing.T) {
	m := NewCrashableMem()
	var synced []string
	m.Inject(func(op Op, name string) error {
		if op == OpSyncDir {
			synced = append(synced, name)
		}
		return nil
	})
	if err := MkdirAllSynced(m, "/a/b/c"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/", "/a", "/a/b"}; !slices.Equal(synced, want) {
		t.Fatalf("synced %q, want %q", synced, want)
	}
	f, _ := m.Create("/a/b/c/f")
	f.Datasync()
	m.SyncDir("/a/b/c")
	if _, ok := m.Crash(SyncedOnly, nil, nil).Files()["/a/b/c/f"]; !ok {
		t.Fatal("a file in a directory made by MkdirAllSynced was lost")
	}
	// Existing: its entry is synced again (a process that made it may have died before).
	synced = nil
	if err := MkdirAllSynced(m, "/a/b/c"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/a/b"}; !slices.Equal(synced, want) {
		t.Fatalf("existing directory: synced %q, want %q", synced, want)
	}
	// A sync that fails is the caller's error.
	m.Inject(func(op Op, name string) error {
		if op == OpSyncDir {
			return syscall.EIO
		}
		return nil
	})
	if err := MkdirAllSynced(m, "/a/d"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("failed sync: %v", err)
	}
}
